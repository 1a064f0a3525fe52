// The rows of the algorithms that train locally between averagings (hpsgd, local_sgd) against
// hand-computed numbers: the scheduler's own passes over the parameters per optimizer, the round
// length `auto` settles on, the agreement's wait, the comm thread's CPU share.
#include <doctest/doctest.h>

#include "sched/hpsgd/hpsgd_timing.h"  // predict_hpsgd
#include "sched/local_sgd_timing.h"    // predict_local_sgd

using namespace dtrain;

namespace {

CodecCost none() {
  CodecCost c;
  c.name = "none";
  return c;
}

// Two ranks, 1 MB of parameters (250 000 floats), 2.2 ms of compute (l_up 0.2 ms). A copy of
// the parameters takes 0.1 ms (β 0.1 ns/B), an element-wise pass 0.05 ms (γ 0.05 ns/B). SGD
// with momentum and weight decay (one state buffer). Not emulated: α 1 us.
// All-reduce (p = 2): 2 messages of α, (1/2)·1 MB·2 copies + (1/2)·1 MB summed:
// 2 us + 0.1 ms + 0.025 ms; S 10 us: a round of 0.137 ms.
TimingInputs two_ranks() {
  TimingInputs in;
  in.l_for = 1e-3, in.l_back = 1e-3, in.l_up = 0.2e-3;
  in.n = 250'000;
  in.p = 2;
  in.global_batch = 100;
  in.link.latency_s = 1e-6;
  in.link.copy_s_per_byte = 0.1e-9;
  in.gamma_s_per_byte = 0.05e-9;
  in.sync_s = 10e-6;
  in.optimizer_states = 1;
  in.gradient_decay = true;
  return in;
}

// An emulated link of 100 MB/s (β 10 ns/B), α 10 us, no overshoot: the all-reduce sleeps
// 2·(10 us + 0.5 MB·10 ns) = 10.02 ms, + 0.125 ms of copies and sum + S: a round of 10.155 ms.
// The agreement (2 doubles, 16 bytes): 2·(10 us + 8 B·10 ns) = 20.16 us (+ 2 ns of copies).
TimingInputs slow_link(TimingInputs in) {
  in.link.latency_s = 10e-6;
  in.link.bandwidth_bytes_per_s = 1e8;
  return in;
}

}  // namespace

TEST_CASE("hpsgd, momentum: a round every iteration copies a, r and the momentum, adds decay") {
  // Each iteration is a round (0.137 ms < one iteration): a ← ĝ (copy 0.1), a += λr/p (pass
  // 0.05), w's one step (the replica's is skipped: l_up once), r ← w and momentum (2 × 0.1).
  const Prediction r = predict_hpsgd(two_ranks(), none(), 0);
  CHECK(r.iteration_s == doctest::Approx(2.2e-3 + 0.35e-3));
  CHECK(r.comm_s == doctest::Approx(0.137e-3));
  // AdamW: two moments copied, no decay in a (decoupled, at w's step).
  TimingInputs adamw = two_ranks();
  adamw.optimizer_states = 2, adamw.gradient_decay = false;
  CHECK(predict_hpsgd(adamw, none(), 0).iteration_s == doctest::Approx(2.2e-3 + 0.4e-3));
  // No core for the comm thread: its CPU work (0.125 ms per round) is the compute thread's.
  TimingInputs shared = two_ranks();
  shared.comm_shares_core = true;
  CHECK(predict_hpsgd(shared, none(), 0).iteration_s == doctest::Approx(2.55e-3 + 0.125e-3));
  // ... and the round waits for it to get its core back (5 ms): 5.137 ms, 2 iterations of
  // 2.2 + [0.1 + 2·0.05 + 2·0.05 + 0.05 + 0.2 + 0.2] / 2 + 0.125 / 2 = 2.6375 ms (5.275 ms).
  shared.yield_wait_s = 5e-3;
  const Prediction slow = predict_hpsgd(shared, none(), 0);
  CHECK(slow.iteration_s == doctest::Approx(2.6375e-3));
  CHECK(slow.comm_s == doctest::Approx(5.137e-3 / 2));
  // Two ranks per core: the passes take twice as long (l_* are given stretched already).
  TimingInputs crowded = two_ranks();
  crowded.crowding = 2;
  CHECK(predict_hpsgd(crowded, none(), 0).iteration_s == doctest::Approx(2.2e-3 + 0.7e-3));
}

TEST_CASE("hpsgd auto: the round spans ceil(all-reduce / iteration) iterations, each slower") {
  // Momentum, round of 10.155 ms. One iteration per round would be 2.55 ms: 4 iterations. In a
  // round of 4: copy 0.1 (a's first), 3 accumulates + 3 scales (6 × 0.05), 4 decays (4 × 0.05),
  // b / 4 (0.05), 3 more steps of w (3 × 0.2), r and momentum (0.2): 1.45 ms, 0.3625 ms each;
  // 4 × 2.5625 = 10.25 ms >= 10.155 + 0.020 (agreement): nothing waits.
  const Prediction r = predict_hpsgd(slow_link(two_ranks()), none(), 0);
  CHECK(r.iteration_s == doctest::Approx(2.5625e-3));
  CHECK(r.comm_s == doctest::Approx(10.155e-3 / 4));
  // Plain SGD: the fused step-and-accumulate adds one pass (0.05), each round w's step and r ← w
  // (0.3). Rounds of 4 (2.325 ms each) would end after 4 iterations: 5, of 2.2 + 0.05 + 0.06.
  TimingInputs plain = slow_link(two_ranks());
  plain.optimizer_states = 0;
  CHECK(predict_hpsgd(plain, none(), 0).iteration_s == doctest::Approx(2.31e-3));
}

TEST_CASE("hpsgd auto: the compute thread waits for the agreement that ends past the boundary") {
  // α 1 ms: the round sleeps 2·(1 ms + 5 ms) = 12 ms, + 0.135 ms; the agreement 2·(1 ms + 80 ns)
  // = 2.00016 ms. Rounds of 5 (passes [0.1 + 8·0.05 + 5·0.05 + 0.05 + 4·0.2 + 0.2] / 5 = 0.36 ms)
  // are 12.8 ms: the agreement ends 12.135 + 2.00016 − 12.8 = 1.33516 ms later, once per 5.
  TimingInputs in = slow_link(two_ranks());
  in.link.latency_s = 1e-3;
  const Prediction r = predict_hpsgd(in, none(), 0);
  CHECK(r.iteration_s == doctest::Approx(2.56e-3 + 1.33516e-3 / 5));
}

TEST_CASE("hpsgd sync_period: a round longer than the period makes the compute thread wait") {
  // Period 2: passes [0.1 + 2·0.05 + 2·0.05 + 0.05 + 0.2 + 0.2] / 2 = 0.375 ms, 2.575 ms per
  // iteration; the round (10.155 ms) outlasts 2 of them by 5.005 ms, once per 2 iterations.
  const Prediction r = predict_hpsgd(slow_link(two_ranks()), none(), 2);
  CHECK(r.iteration_s == doctest::Approx(2.575e-3 + 5.005e-3 / 2));
}

TEST_CASE("local_sgd: the averaging's five passes and all-reduce every period, lag as sqrt") {
  // Period 4: delta ← w − anchor, w ← anchor + delta / p, anchor ← w: 3 copies (0.3 ms) and
  // 2 axpys (0.1 ms), the all-reduce 0.127 ms and S 0.01 ms: 0.537 ms once per 4 iterations.
  // The slowest rank's lag of 0.4 ms per iteration is 0.4 · √4 = 0.8 ms per period: 0.2 ms each.
  TimingInputs in = two_ranks();
  in.l_skew = 0.4e-3;
  const Prediction r = predict_local_sgd(in, none(), 4);
  CHECK(r.iteration_s == doctest::Approx(2.2e-3 + 0.2e-3 + 0.537e-3 / 4));
  CHECK(r.comm_s == doctest::Approx(0.537e-3 / 4));
  in.crowding = 2;  // the passes at half speed
  CHECK(predict_local_sgd(in, none(), 4).iteration_s ==
        doctest::Approx(2.2e-3 + 0.2e-3 + 0.937e-3 / 4));
  in.p = 1;  // one rank: its own steps
  CHECK(predict_local_sgd(in, none(), 4).iteration_s == doctest::Approx(2.2e-3));
}
