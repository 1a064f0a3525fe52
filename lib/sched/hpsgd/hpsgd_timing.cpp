#include "sched/hpsgd/hpsgd_timing.h"

#include <algorithm>  // max
#include <cmath>      // ceil

namespace dtrain {

namespace {

// What a round of `every` iterations adds to their compute_seconds (which has one l_up each),
// per iteration: the scheduler's own passes over the n trainable floats, a copy costing β per
// byte and an element-wise pass (axpy, scale, the fused step's extra stream) γ, both stretched
// as the compute is when ranks share cores.
// - Plain SGD (no optimizer state): every iteration's sgd_step_accumulate is the step plus one
//   more stream (a); each round w's own step (≈ l_up) and r ← w.
// - SGD with momentum, AdamW: every iteration accumulates ĝ into a (the first of a round a copy),
//   adds SGD's decay to a (an axpy), and a plain one scales g and steps the replica; the round's
//   iteration skips the replica's step, scales b by 1/k (k > 1) and steps w k times, then copies
//   r ← w and each of the optimizer's state buffers. So 2·every − 1 steps of l_up in a round.
double round_passes(const TimingInputs& in, double every) {
  const double bytes = 4.0 * static_cast<double>(in.n);
  const double copy = bytes * in.link.copy_s_per_byte * in.crowding;
  const double pass = bytes * in.gamma_s_per_byte * in.crowding;
  if (in.optimizer_states == 0) return pass + (in.l_up + copy) / every;
  const double decay = in.gradient_decay ? pass : 0;
  const double round = copy + 2 * (every - 1) * pass + every * decay + (every > 1 ? pass : 0) +
                       (every - 1) * in.l_up + (1 + in.optimizer_states) * copy;
  return round / every;
}

}  // namespace

// HPSGD as its scheduler runs it: the compute thread never waits for the all-reduce (it runs
// on the comm thread while the replica trains); it pays for the passes of round_passes and,
// with no core of its own for the comm thread, for that thread's CPU work (and the round waits
// once for that thread to get the core back). `auto` starts a round at the first boundary
// after the previous one ended, so a round spans every = ⌈all-reduce / iteration⌉ iterations
// (the iteration depends on every: iterated to its fixed point); the compute thread waits at
// that boundary only when the agreement on it (a small all-reduce queued after the round) is
// not done yet. With `sync_period: N` it waits when the all-reduce outlasts N iterations. The
// ranks do not meet every iteration: no l_skew. Not modelled: the meetings when one rank gets
// ahead by more than an iteration (a speed difference between ranks a one-rank profile lacks).
Prediction predict_hpsgd(const TimingInputs& in, const CodecCost& codec, int period) {
  const double compute = compute_seconds(in);
  if (in.p <= 1) return make_prediction(in, "hpsgd", codec, compute, 0, compute);
  const double own = compute - in.l_skew;
  // The compute thread never waits for the ranks to meet: the round's own transfers, not the
  // oversubscribed wait of a collective the compute threads stop for (allreduce_cost).
  const CommCost cost = transfer_cost(in, codec, static_cast<double>(in.n));
  // Without a core of its own, the comm thread that reaches the all-reduce first polls for its
  // peer with sched_yield behind its rank's compute thread (which never waits here): it sees
  // the peer's first message only when the core comes back (yield_wait_s, once a round).
  const double round = cost.total() + in.sync_s + (in.comm_shares_core ? in.yield_wait_s : 0);
  const CodecCost plain{.name = "none"};
  const double agreement = transfer_cost(in, plain, 2.0 * in.p).total();  // p doubles
  const double cpu = in.comm_shares_core ? cost.cpu_s : 0;
  auto local = [&](double every) { return own + round_passes(in, every) + cpu / every; };
  double every = period > 0 ? period : 1;
  for (int i = 0; period <= 0 && i < 8; ++i) {
    const double next = std::max(1.0, std::ceil(round / local(every)));
    if (next == every) break;
    every = next;
  }
  const double busy = every * local(every);
  const double late =
      period > 0 ? std::max(0.0, round - busy) : std::max(0.0, round + agreement - busy);
  const double iteration = local(every) + (late + idle_penalty(in, late)) / every;
  return make_prediction(in, "hpsgd", codec, iteration, round / every, iteration);
}

}  // namespace dtrain
