#include "sched/gossip/d_psgd_timing.h"

#include <algorithm>  // max

namespace dtrain {

// D-PSGD as its scheduler runs it, with m = 4n bytes of model (not in the Pipe-SGD paper):
// each iteration hands the exchange to the comm thread (S) and computes meanwhile. Ring and
// exponential: it sends the model to each of its d neighbours (d messages of m bytes, paced one
// after another; the receives overlap them), then the compute thread mixes
// x ← (x + Σ_j x_j)/(d + 1) (d sums: d·γ·m) and steps (l_up). Complete: one all-reduce of the
// model on a snapshot (a copy of m, and one back with the scale). The compute thread waits for
// the longer of forward + backward and the exchange, and computes cold after idling.
// When the comm thread has no core of its own, only the exchange's CPU work (S, the copies, the
// all-reduce's sums) competes with forward and backward (share_core); its waiting — the emulated
// link's sleeps, a neighbour's latency — still hides behind them. (Measured on 2 cores: ResNet-20
// on 2 ranks at 100 Mbit/s exchanges 86 ms of sleep in a 115 ms iteration of 112 ms compute.)
// A rank needs its neighbours' models of this iteration, sent when they start it: neighbours
// are at most one iteration apart, ranks at distance h at most h, so in the long run every rank
// goes at the slowest rank's pace (a straggler's pace propagates through the graph): its
// compute is on the critical path, and so is the lag of the ranks it meets (l_skew, which the
// profile measures for the whole job: an overestimate for a few neighbours).
Prediction predict_d_psgd(const TimingInputs& in, const CodecCost& codec, Topology topology) {
  const double compute = compute_seconds(in);
  if (in.p <= 1) return make_prediction(in, "d_psgd", codec, compute, 0, compute);
  const double m = 4.0 * static_cast<double>(in.n);
  CommCost exchange{0, in.sync_s};
  double mix = 0;
  if (topology == Topology::complete) {
    const CommCost all = allreduce_cost(in, codec, static_cast<double>(in.n));
    exchange.wait_s += all.wait_s, exchange.cpu_s += all.cpu_s;
    mix = 2 * in.link.copy_s_per_byte * m;
  } else {
    const double d = static_cast<double>(topology_neighbours(topology, 0, in.p).size());
    const CommCost one = in.link.message(m);
    // The neighbours meet every iteration: with the compute threads time-sliced the last one
    // is as late as for an all-reduce (oversubscribed_wait_s).
    exchange.wait_s += d * one.wait_s + oversubscribed_wait_s(in);
    exchange.cpu_s += d * one.cpu_s;
    mix = d * in.gamma_s_per_byte * m;
  }
  const double forward_backward = (in.l_for + in.l_back) * slowest_slowdown(in);
  const SharedCore shared = share_core(in, forward_backward, exchange.total(), exchange.cpu_s);
  // The compute thread's core also did the comm thread's CPU work, then it waits for the rest.
  const double idle =
      (shared.compute_s - forward_backward) + std::max(0.0, shared.comm_s - shared.compute_s);
  const double iteration = compute + idle + idle_penalty(in, idle) + mix;
  Prediction r =
      make_prediction(in, "d_psgd", codec, iteration - idle, exchange.total(), iteration);
  r.compute_bound = forward_backward >= exchange.total();
  return r;
}

}  // namespace dtrain
