#include "sched/pipe_sgd_timing.h"

#include <fmt/format.h>  // the recommendation

#include <algorithm>  // max, min
#include <limits>     // infinity: the fastest row

namespace dtrain {

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
    // Not in the paper: when the comm thread has no core of its own, its CPU work is also done
    // by the core that computes, partly time-sliced with it (share_core).
    const SharedCore shared = share_core(in, compute, comm, L * one.cpu_s);
    compute = shared.compute_s, comm = shared.comm_s;
    // The compute thread idles while communication is the longer of the two.
    compute += idle_penalty(in, comm - compute);
    iteration = std::max(compute, comm);
  } else {
    // K = 1 is D-Sync (Eq. 2); with L > 1 segments the first L−1 all-reduces may hide behind
    // the rest of the backward pass, but the last one is always exposed.
    const double hidden =
        std::min(comm * (L - 1.0) / L, in.l_back * slowest_slowdown(in) * (L - 1.0) / L);
    compute += idle_penalty(in, comm - hidden);
    iteration = compute + comm - hidden;
  }
  Prediction r = make_prediction(in, "pipe_sgd", codec, compute, comm, iteration);
  r.K = K;
  r.L = L;
  return r;
}

Recommendation recommend_pipe_sgd(const TimingInputs& in,
                                  const std::vector<Prediction>& predictions, int segments) {
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
  std::string segmented;
  const CodecCost* codec = nullptr;
  for (const CodecCost& c : in.codecs)
    if (c.name == pick.compression) codec = &c;
  if (codec && segments > 1) {
    const Prediction seg = predict_pipe_sgd(in, *codec, 2, segments);
    if (seg.iteration_s < pick.iteration_s) rec.L = segments;
    segmented = fmt::format("; algorithm.segments={} predicts {:.2f} ms ({})", segments,
                            seg.iteration_s * 1e3,
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
      pick.compression, rec.L, pick.iteration_s * 1e3, pick.speedup, bound, segmented);
  if (in.p <= 1)
    rec.text = "one rank: nothing to communicate, every algorithm runs at the compute time";
  else if (rec.best.iteration_s < 0.98 * pick.iteration_s)  // clearly faster, not noise
    rec.text += fmt::format("\n  (faster still in the table: {} + {}, {:.2f} ms/iteration)",
                            rec.best.algorithm, rec.best.compression, rec.best.iteration_s * 1e3);
  return rec;
}

}  // namespace dtrain
