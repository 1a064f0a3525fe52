#include "plan/timing_model.h"

#include <algorithm>  // max

namespace dtrain {
namespace {

constexpr double kFloatBytes = 4;

}  // namespace

double reference_seconds(const std::vector<Prediction>& rows) {
  double reference = 0;
  for (const Prediction& r : rows)
    if (r.reference && (r.compression == "none" || reference == 0)) reference = r.iteration_s;
  return reference;
}

Prediction make_prediction(const TimingInputs& in, const std::string& algorithm,
                           const CodecCost& codec, double compute_s, double comm_s,
                           double iteration_s) {
  Prediction r;
  r.algorithm = algorithm;
  r.compression = codec.name;
  r.compute_s = compute_s;
  r.comm_s = comm_s;
  r.iteration_s = iteration_s;
  r.compute_bound = compute_s >= comm_s;
  r.samples_per_s = iteration_s > 0 ? static_cast<double>(in.global_batch) / iteration_s : 0;
  r.scaling_efficiency = iteration_s > 0 ? compute_s / iteration_s : 1;
  return r;
}

double rank_slowdown(const TimingInputs& in, int rank) {
  const auto r = static_cast<size_t>(rank);
  return rank >= 0 && r < in.rank_slowdown.size() ? std::max(1.0, in.rank_slowdown[r]) : 1.0;
}

double slowest_slowdown(const TimingInputs& in) {
  double slowest = 1;
  for (int r = 0; r < in.p; ++r) slowest = std::max(slowest, rank_slowdown(in, r));
  return slowest;
}

double compute_seconds(const TimingInputs& in) {
  return in.l_up + (in.l_for + in.l_back) * slowest_slowdown(in) + in.l_data +
         (in.p > 1 ? in.l_skew : 0);
}

SharedCore share_core(const TimingInputs& in, double compute_s, double comm_s, double cpu_s) {
  if (!in.comm_shares_core || in.p <= 1 || comm_s <= 0) return {compute_s, comm_s};
  // The comm threads' CPU work is done on the same crowded cores as the stretched compute.
  const double cpu = cpu_s * std::max(1.0, in.crowding);
  return {compute_s + cpu, comm_s + (cpu - cpu_s) + cpu * std::min(1.0, compute_s / comm_s)};
}

double idle_penalty(const TimingInputs& in, double idle) {
  if (idle <= 0 || in.idle_s.empty()) return 0;
  double d0 = 0, p0 = 0;  // no idling, no penalty
  for (size_t i = 0; i < in.idle_s.size() && i < in.idle_penalty_s.size(); ++i) {
    const double d1 = in.idle_s[i], p1 = in.idle_penalty_s[i];
    if (idle <= d1) return p0 + (p1 - p0) * (idle - d0) / (d1 - d0);
    d0 = d1, p0 = p1;
  }
  return p0;
}

double crowded_yield_wait_s(const TimingInputs& in) {
  return in.crowding > 1 ? in.crowding * in.yield_wait_s : 0;
}

double oversubscribed_wait_s(const TimingInputs& in) {
  if (in.crowding <= 1) return 0;
  // The ranks' compute threads are time-sliced (crowding of them per core): the last rank
  // reaches the collective up to a slice per thread late, and its comm thread then gets its
  // core back after a slice (yield_wait_s each); never later than its whole (crowded) compute.
  const double compute = (in.l_for + in.l_back) * slowest_slowdown(in) + in.l_up;
  return std::min(crowded_yield_wait_s(in), compute);
}

CommCost allreduce_cost(const TimingInputs& in, const CodecCost& codec, double elements) {
  CommCost cost = transfer_cost(in, codec, elements);
  if (in.p > 1 && elements > 0) cost.wait_s += oversubscribed_wait_s(in);
  return cost;
}

CommCost transfer_cost(const TimingInputs& in, const CodecCost& codec, double elements) {
  const int p = in.p;
  if (p <= 1 || elements <= 0) return {};
  const double steps = 2.0 * (p - 1);  // messages per rank: reduce-scatter + all-gather
  const double share = (p - 1.0) / p;  // fraction of the buffer each rank reduces
  if (codec.name == "none") {
    // Eq. 5's communication term, 2(p−1)·α + 2((p−1)/p)·n·β + ((p−1)/p)·n·γ, n in bytes.
    // dtrain runs MPI_Allreduce here; PacedComm charges the ring's 2(p−1)(α + (n/p)·β) in one
    // sleep (one overshoot), then MPI moves 2((p−1)/p)·n bytes for real and sums (γ).
    const double bytes = kFloatBytes * elements;
    const LinkCost& l = in.link;
    const double link = steps * (l.latency_s + bytes / p * l.sleep_s_per_byte());
    return {l.emulated() ? l.paced_s(link) : steps * l.latency_s,
            2.0 * share * bytes * l.copy_s_per_byte + share * bytes * in.gamma_s_per_byte};
  }
  // dtrain's ring with the codec inside (ring_allreduce.cpp). Per rank, for blocks of n/p:
  //   reduce-scatter, p−1 steps: encode, sendrecv of the encoded block, decode_add;
  //   all-gather: the owner encodes and decodes its reduced block once, then p−1 steps of
  //   sendrecv and decode (forwarded blocks are not re-encoded).
  // So p encodes, p−1 decode_adds and p decodes where Eq. 5 has ((p−1)/p)·n·γ, and each of the
  // 2(p−1) messages carries the encoded block instead of n/p floats.
  const double block = elements / p;
  const CommCost one = in.link.message(codec.wire_bytes(block));
  const double codec_s =
      block * (p * codec.encode_s + (p - 1) * codec.decode_add_s + p * codec.decode_s);
  return {steps * one.wait_s, steps * one.cpu_s + codec_s};
}

double scaling_efficiency(double compute_s, double comm_s) {
  const double bound = std::max(compute_s, comm_s);
  return bound > 0 ? compute_s / bound : 1;
}

void set_speedups(std::vector<Prediction>& rows) {
  const double reference = reference_seconds(rows);
  for (Prediction& r : rows) r.speedup = r.iteration_s > 0 ? reference / r.iteration_s : 1;
}

}  // namespace dtrain
