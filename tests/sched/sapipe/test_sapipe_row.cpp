// SAPipe's plan row (predict_sapipe) against hand-computed timelines of run_pipelined: the
// compensation's passes, the hook's wait with one segment and with several, `auto`'s growth
// past the paper's choice, and the comm thread's CPU share on a shared core.
#include <doctest/doctest.h>

#include "../../plan/timing_fixtures.h"  // none
#include "plan/stale_layers.h"           // choose_stale_layers: the paper's choice
#include "sched/sapipe/sapipe_timing.h"  // predict_sapipe

using namespace dtrain;
using namespace dtrain::test;

namespace {

constexpr double ms = 1e-3;

// Two ranks, three layers of 1000, 4500 and 4500 floats, each 1 ms forward and 1 ms backward;
// l_up 1 ms; nothing else on the compute thread. An all-reduce of e floats takes e · `per_float`
// seconds: 2(p − 1) = 2 messages of 4e/2 bytes at β, no latency, copy or sum (no CPU work).
TimingInputs three_layers(double per_float) {
  TimingInputs in;
  in.l_for = 3 * ms, in.l_back = 3 * ms, in.l_up = 1 * ms;
  in.n = 10000;
  in.p = 2;
  in.global_batch = 100;
  in.layer_forward_s = {1 * ms, 1 * ms, 1 * ms};
  in.layer_backward_s = {1 * ms, 1 * ms, 1 * ms};
  in.layer_elements = {1000, 4500, 4500};
  in.link.bandwidth_bytes_per_s = 1 / (per_float / 4);
  return in;
}

SapipeOptions options(const char* k, const char* compensation = "none", int segments = 1) {
  SapipeOptions o;
  o.stale_layers = std::string(k) == "auto"  ? config::WordOr<int>::named("auto")
                   : std::string(k) == "all" ? config::WordOr<int>::named("all")
                                             : config::WordOr<int>::of(std::stoi(k));
  o.compensation = compensation;
  o.segments = segments;
  return o;
}

}  // namespace

TEST_CASE("sapipe row: all layers stale and compute-bound is Pipe-SGD's compute") {
  const TimingInputs in = three_layers(0.1e-6);  // the whole all-reduce: 1 ms
  const Prediction r = predict_sapipe(in, none(), options("all"));
  CHECK(r.configuration == "k=3");
  CHECK(r.iteration_s == doctest::Approx(7 * ms));  // l_up + 3 + 3
  CHECK(r.comm_s == doctest::Approx(1 * ms));
  CHECK(r.detail == "stall 0.000 ms");
  // After backward the scheduler checks the gradient (a dot over its 40 kB, at γ per byte).
  TimingInputs checked = in;
  checked.gamma_s_per_byte = 1e-9;
  CHECK(predict_sapipe(checked, none(), options("all")).iteration_s ==
        doctest::Approx(7 * ms + 4 * 10000 * 1e-9));
}

TEST_CASE("sapipe row: the compensation's passes over the stale prefix") {
  TimingInputs in = three_layers(0.1e-6);
  in.l_step_dot = 1.5 * ms, in.l_predict_sum = 1.2 * ms;  // over all 10000 floats
  in.link.copy_s_per_byte = 1e-9;                         // keeping the own gradient
  // wp3 (outer): both passes over all of it, and 4 bytes a float copied after backward.
  CHECK(predict_sapipe(in, none(), options("all", "wp3")).iteration_s ==
        doctest::Approx((1.5 + 1.2 + 3 + 3) * ms + 4 * 10000 * 1e-9));
  // k = 1: a tenth of each pass, the fresh 90 % stepped at the hook at l_up's rate.
  CHECK(predict_sapipe(in, none(), options("1", "wp3")).iteration_s ==
        doctest::Approx(0.1 * (1.5 + 1.2) * ms + 0.9 * ms + 6 * ms + 4 * 1000 * 1e-9));
  // Not profiled: each of wp3's passes counts as one l_up.
  in.l_step_dot = in.l_predict_sum = 0;
  CHECK(predict_sapipe(in, none(), options("all", "wp3")).iteration_s ==
        doctest::Approx((2 + 6) * ms + 4 * 10000 * 1e-9));
  // No compensation: the plain step, in two parts.
  CHECK(predict_sapipe(in, none(), options("1", "none")).iteration_s == doctest::Approx(7 * ms));
}

TEST_CASE("sapipe row: with one segment the fresh all-reduce waits for the fresh backward") {
  // All-reduces: the fresh 9000 floats 4.5 ms, the prefix's 1000 0.5 ms. k = 1, no compensation:
  // the prefix's step 0.1 ms, forward of layer 1, the hook, the fresh step 0.9 ms, forward of
  // layers 2 and 3, backward 3 → 2 (then the fresh all-reduce starts) → 1.
  const TimingInputs in = three_layers(0.5e-6);
  // Between the fresh all-reduce's start and the hook: layer 1's backward, the prefix's step,
  // layer 1's forward: 2.1 ms of its 4.5.
  const Prediction one = predict_sapipe(in, none(), options("1"));
  CHECK(one.configuration == "k=1");
  CHECK(one.iteration_s == doctest::Approx((7 + 4.5 - 2.1) * ms));
  CHECK(one.detail == "stall 2.400 ms");
  // Two segments of 4500 floats (2.25 ms each): layer 3's starts after its backward, layer 2's
  // 1 ms later but queued behind it: the fresh sum is in 3.25 + 2.25 ms after backward began,
  // the hook comes 3 ms (backward) + 0.1 + 1 ms after that.
  const Prediction two = predict_sapipe(in, none(), options("1", "none", 2));
  CHECK(two.iteration_s == doctest::Approx((7 + 5.5 - 4.1) * ms));
  CHECK(two.detail == "stall 1.400 ms");
}

TEST_CASE("sapipe row: auto grows k where the paper's choice stalls the hook") {
  // 0.3 us a float: the whole all-reduce 3 ms, 1024 floats (its fixed part) 0.3072 ms.
  const TimingInputs in = three_layers(0.3e-6);
  // The paper's C2 takes k = 1: the fresh layers' share of (3 − 0.3072) ms plus 0.3072 ms fits
  // in Σ_{i<3} b_i + u_1 = 3 ms ...
  std::vector<LayerCost> layers;
  for (const double share : {0.1, 0.45, 0.45})
    layers.push_back({1 * ms, 1 * ms, (3 - 0.3072) * ms * share});
  CHECK(choose_stale_layers(layers, 0.3072 * ms).k == 1);
  // ... but the fresh all-reduce (2.7 ms) starts after layer 2's backward, 2.1 ms before the
  // hook: it waits 0.6 ms of a 7.6 ms iteration, over 3 %, and k grows to 2, where layer 3's
  // all-reduce (1.35 ms) starts 4.55 ms before the hook.
  const Prediction r = predict_sapipe(in, none(), options("auto"));
  CHECK(r.configuration == "k=2");
  CHECK(r.iteration_s == doctest::Approx(7 * ms));
  CHECK(r.detail == "stall 0.000 ms");
  // A fixed k is kept as configured.
  CHECK(predict_sapipe(in, none(), options("1")).iteration_s == doctest::Approx(7.6 * ms));
}

TEST_CASE("sapipe row: on a shared core the all-reduce's CPU work slows both threads") {
  // The all-reduce of all 10000 floats: 2 ms asleep on the link, 2 · (1/2) · 40 kB copied at
  // 25 ns/B = 1 ms of CPU work.
  TimingInputs in = three_layers(0.2e-6);
  in.link.copy_s_per_byte = 25e-9;
  in.comm_shares_core = true;
  // Compute-bound: the compute thread does the comm thread's 1 ms too (7 + 1).
  CHECK(predict_sapipe(in, none(), options("all")).iteration_s == doctest::Approx(8 * ms));
  // Communication-bound (10 ms asleep): the CPU work meets the computation 7/11 of the time.
  in.link.bandwidth_bytes_per_s = 1 / (1e-6 / 4);
  const Prediction r = predict_sapipe(in, none(), options("all"));
  CHECK(r.iteration_s == doctest::Approx((11 + 7.0 / 11) * ms));
  CHECK_FALSE(r.compute_bound);
}

TEST_CASE("sapipe row: no stale layers is D-Sync") {
  // The hook at the first layer waits for the whole all-reduce, which starts after backward.
  const TimingInputs in = three_layers(0.25e-6);  // 2.5 ms
  const Prediction r = predict_sapipe(in, none(), options("0"));
  CHECK(r.configuration == "k=0");
  CHECK(r.iteration_s == doctest::Approx(9.5 * ms));
}

TEST_CASE("sapipe row: the slowest rank's lag") {
  TimingInputs in = three_layers(0.25e-6);  // the whole all-reduce: 2.5 ms
  in.l_skew = 0.5 * ms;
  // All stale: the all-reduce hidden, the iteration at the slowest rank's pace.
  CHECK(predict_sapipe(in, none(), options("all")).iteration_s == doctest::Approx(7.5 * ms));
  // None stale: the all-reduce starts 0.5 ms after backward, the hook waits for it: D-Sync.
  const Prediction sync = predict_sapipe(in, none(), options("0"));
  CHECK(sync.iteration_s == doctest::Approx((7 + 0.5 + 2.5) * ms));
  CHECK(sync.detail == "stall 2.500 ms");
}
