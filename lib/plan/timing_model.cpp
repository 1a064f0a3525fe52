#include "plan/timing_model.h"

#include <fmt/format.h>  // the recommendation text

#include <algorithm>  // max, min
#include <limits>

namespace dtrain {
namespace {

constexpr double kFloatBytes = 4;

// The iteration time speedups are measured against: sync + none, else the first sync row.
double reference_seconds(const std::vector<Prediction>& rows) {
  double reference = 0;
  for (const Prediction& r : rows)
    if (r.algorithm == "sync" && (r.compression == "none" || reference == 0))
      reference = r.iteration_s;
  return reference;
}

}  // namespace

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

double compute_seconds(const TimingInputs& in) {
  return in.l_up + in.l_for + in.l_back + in.l_data + (in.p > 1 ? in.l_skew : 0);
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

CommCost allreduce_cost(const TimingInputs& in, const CodecCost& codec, double elements) {
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

Prediction predict_sync(const TimingInputs& in, const CodecCost& codec, int L) {
  if (L > 1) {
    Prediction r = predict_pipe_sgd(in, codec, 1, L);
    r.algorithm = "sync";
    r.K = 0;
    return r;
  }
  // Eq. 2: l_up + l_comp + l_comm. The whole all-reduce is on the critical path:
  // sync_scheduler.cpp waits for it before the update, and computes again cold.
  const double comm =
      in.p > 1 ? allreduce_seconds(in, codec, static_cast<double>(in.n)) + in.sync_s : 0;
  const double compute = compute_seconds(in) + idle_penalty(in, comm);
  return make_prediction(in, "sync", codec, compute, comm, compute + comm);
}

Prediction predict_ps_sync(const TimingInputs& in, const CodecCost& codec) {
  // Not in the paper's equations; derived from ps_sync_scheduler.cpp and PacedComm. Rank 0 is
  // the server and also computes its share, so all ranks finish backward together. Then:
  //  push: each worker encodes its n-element gradient (a memcpy for `none`) and sends it
  //    (α + W·β, asleep, then the copy). The server receives them one after another: its
  //    incoming link is paced, so each further worker adds W·β (a sleep), and it decode_adds
  //    every one.
  //  update: only the server steps (l_up); the workers wait for the weights.
  //  pull: the server sends the f32 weights to the workers one after another.
  //  Then everyone computes again, cold after the wait.
  if (in.p <= 1)
    return make_prediction(in, "ps_sync", codec, compute_seconds(in), 0, compute_seconds(in));
  const double n = static_cast<double>(in.n);
  const double workers = in.p - 1;
  const double w = codec.wire_bytes(n);
  const LinkCost& link = in.link;
  const CommCost first = link.message(w);
  const double ingress =
      link.emulated() ? link.paced_s(w * link.sleep_s_per_byte()) : w * link.copy_s_per_byte;
  const double push = codec.encode_s * n + first.total() + (workers - 1) * ingress +
                      workers * codec.decode_add_s * n;
  const double pull = workers * link.message(kFloatBytes * n).total();
  const double comm = push + pull + in.sync_s;
  const double compute = compute_seconds(in) + idle_penalty(in, comm);
  return make_prediction(in, "ps_sync", codec, compute, comm, compute + comm);
}

Prediction predict_pipe_sgd(const TimingInputs& in, const CodecCost& codec, int K, int L) {
  L = std::max(L, 1);
  double compute = compute_seconds(in);
  // Eq. 6: L all-reduces of n/L elements each: 2(p−1)L·α + 2((p−1)/p)·n·β + ((p−1)/p)·n·γ +
  // L·S. The communication thread runs them, codec work included.
  CommCost one;
  if (in.p > 1) one = allreduce_cost(in, codec, static_cast<double>(in.n) / L);
  double comm = in.p > 1 ? L * (one.total() + in.sync_s) : 0;
  double iteration;
  if (K >= 2) {
    // Eq. 4/5/6: with limited resources the iteration is bound by whichever of computation
    // (l_up + l_for + l_back on the compute thread) and communication is longer, for any K ≥ 2.
    // Not in the paper: when the comm thread has no core of its own, its CPU work W is also
    // done by the core that computes (compute + W), and the part of W that meets the compute
    // thread running — a fraction compute/comm of the time, when communication is longer —
    // is time-sliced with it and takes twice as long.
    if (in.comm_shares_core && in.p > 1 && comm > 0) {
      const double w = L * one.cpu_s;
      comm += w * std::min(1.0, compute / comm);
      compute += w;
    }
    // The compute thread idles while communication is the longer of the two.
    compute += idle_penalty(in, comm - compute);
    iteration = std::max(compute, comm);
  } else {
    // K = 1 is D-Sync (Eq. 2); with L > 1 segments the first L−1 all-reduces may hide behind
    // the rest of the backward pass, but the last one is always exposed.
    const double hidden = std::min(comm * (L - 1.0) / L, in.l_back * (L - 1.0) / L);
    compute += idle_penalty(in, comm - hidden);
    iteration = compute + comm - hidden;
  }
  Prediction r = make_prediction(in, "pipe_sgd", codec, compute, comm, iteration);
  r.K = K;
  r.L = L;
  return r;
}

double scaling_efficiency(double compute_s, double comm_s) {
  const double bound = std::max(compute_s, comm_s);
  return bound > 0 ? compute_s / bound : 1;
}

std::vector<Prediction> predict_all(const TimingInputs& in) {
  std::vector<Prediction> rows;
  for (const CodecCost& c : in.codecs) rows.push_back(predict_sync(in, c));
  for (const CodecCost& c : in.codecs) rows.push_back(predict_ps_sync(in, c));
  for (const CodecCost& c : in.codecs) rows.push_back(predict_pipe_sgd(in, c, in.K, in.L));
  set_speedups(rows);
  return rows;
}

void set_speedups(std::vector<Prediction>& rows) {
  const double reference = reference_seconds(rows);
  for (Prediction& r : rows) r.speedup = r.iteration_s > 0 ? reference / r.iteration_s : 1;
}

Recommendation recommend(const TimingInputs& in, const std::vector<Prediction>& predictions) {
  Recommendation rec;
  double best = std::numeric_limits<double>::infinity();
  for (const Prediction& r : predictions)
    if (r.iteration_s < best) best = r.iteration_s, rec.best = r;
  const double reference = reference_seconds(predictions);

  // K = 2, L = 1, and the least compression that makes Pipe-SGD compute-bound (the codecs are
  // in order of increasing loss); if none does, the fastest.
  std::vector<Prediction> pipes;
  for (const CodecCost& c : in.codecs) {
    Prediction r = predict_pipe_sgd(in, c, 2, 1);
    r.speedup = r.iteration_s > 0 && reference > 0 ? reference / r.iteration_s : 1;
    pipes.push_back(r);
  }
  bool found = false;
  for (const Prediction& r : pipes)
    if (r.compute_bound) {
      rec.fastest_pipe = r, found = true;
      break;
    }
  if (!found) {
    double fastest = std::numeric_limits<double>::infinity();
    for (const Prediction& r : pipes)
      if (r.iteration_s < fastest) fastest = r.iteration_s, rec.fastest_pipe = r;
  }
  const Prediction& pick = rec.fastest_pipe;
  rec.compute_bound = pick.compute_bound;

  // Eq. 5 vs Eq. 6: more segments only add latency and synchronisation per segment.
  std::string segments;
  const CodecCost* codec = nullptr;
  for (const CodecCost& c : in.codecs)
    if (c.name == pick.compression) codec = &c;
  if (codec && in.L > 1) {
    const Prediction seg = predict_pipe_sgd(in, *codec, 2, in.L);
    if (seg.iteration_s < pick.iteration_s) rec.L = in.L;
    segments =
        fmt::format("; algorithm.segments={} predicts {:.2f} ms ({})", in.L, seg.iteration_s * 1e3,
                    rec.L == 1 ? "Eq. 6 > Eq. 5: keep L=1" : "faster: keep it");
  }

  const std::string bound =
      pick.compute_bound
          ? fmt::format(
                "compute-bound (comm {:.2f} ms <= compute {:.2f} ms): communication is "
                "hidden, scaling efficiency 1 (Eq. 7)",
                pick.comm_s * 1e3, pick.compute_s * 1e3)
          : fmt::format(
                "still communication-bound (comm {:.2f} ms > compute {:.2f} ms) with "
                "every codec: scaling efficiency {:.2f} (Eq. 7)",
                pick.comm_s * 1e3, pick.compute_s * 1e3,
                scaling_efficiency(pick.compute_s, pick.comm_s));
  rec.text = fmt::format(
      "algorithm.name=pipe_sgd, K=2, compression.name={}, sequential communication (L={}): "
      "{:.2f} ms/iteration, {:.2f}x sync+none; {}{}",
      pick.compression, rec.L, pick.iteration_s * 1e3, pick.speedup, bound, segments);
  if (in.p <= 1)
    rec.text = "one rank: nothing to communicate, every algorithm runs at the compute time";
  else if (rec.best.iteration_s < 0.98 * pick.iteration_s)  // clearly faster, not noise
    rec.text += fmt::format("\n  (faster still in the table: {} + {}, {:.2f} ms/iteration)",
                            rec.best.algorithm, rec.best.compression, rec.best.iteration_s * 1e3);
  return rec;
}

}  // namespace dtrain
