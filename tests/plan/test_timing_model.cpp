// The timing model's building blocks against hand-computed numbers: Eq. 7, the ring's codec
// calls, and the link with and without emulation (the algorithms' rows:
// tests/sched/test_timing_rows.cpp).
#include <doctest/doctest.h>

#include "plan/timing_model.h"
#include "timing_fixtures.h"  // four_ranks, none, quantize8

using namespace dtrain;
using namespace dtrain::test;

TEST_CASE("the ring with a codec: p encodes, p-1 decode_adds, p decodes, 2(p-1) encoded blocks") {
  const TimingInputs in = four_ranks();
  // Blocks of 250000 floats, 250004 bytes each on the wire.
  const double messages = 6 * (10e-6 + 250004 * 1e-9);
  const double codec = 250000 * (4 * 1e-9 + 3 * 0.5e-9 + 4 * 0.5e-9);
  CHECK(allreduce_seconds(in, quantize8(), 1e6) == doctest::Approx(messages + codec));
}

TEST_CASE("Eq. 7: scaling efficiency") {
  CHECK(scaling_efficiency(3.5e-3, kCommNone) == doctest::Approx(3.5e-3 / kCommNone));
  CHECK(scaling_efficiency(2.0, 1.0) == doctest::Approx(1.0));
  CHECK(scaling_efficiency(0, 0) == doctest::Approx(1.0));
}

TEST_CASE("link emulation: every sleep overshoots, then the bytes are really copied") {
  TimingInputs in;
  in.p = 2, in.n = 1000;
  in.link.latency_s = 50e-6, in.link.bandwidth_bytes_per_s = 125e6;  // β = 8 ns/B
  in.link.copy_s_per_byte = 0.1e-9;
  in.link.overshoot_s = 60e-6, in.link.overshoot_per_s = 0.01;
  auto late = [](double s) { return s + 60e-6 + 0.01 * s; };
  // MPI_Allreduce: one sleep of 2(α + 2000 B·β), then 2·(1/2)·4000 B copied.
  const CommCost mpi = allreduce_cost(in, none(), 1000);
  CHECK(mpi.wait_s == doctest::Approx(late(2 * (50e-6 + 2000 * 8e-9))));
  CHECK(mpi.cpu_s == doctest::Approx(4000 * 0.1e-9));
  // The ring: both messages sleep (and overshoot), then copy their 504 bytes; the codec is CPU.
  const CommCost ring = allreduce_cost(in, quantize8(), 1000);
  CHECK(ring.wait_s == doctest::Approx(2 * late(50e-6 + 504 * 8e-9)));
  CHECK(ring.cpu_s ==
        doctest::Approx(2 * 504 * 0.1e-9 + 500 * (2 * 1e-9 + 1 * 0.5e-9 + 2 * 0.5e-9)));
}

TEST_CASE("without emulation the transfer is CPU work (a copy), not a sleep") {
  TimingInputs in = four_ranks();
  in.link.copy_s_per_byte = in.link.sleep_s_per_byte();
  in.link.bandwidth_bytes_per_s = 0;
  in.link.overshoot_s = 1;  // no sleeps: never charged
  const CommCost c = allreduce_cost(in, none(), 1e6);
  CHECK(c.wait_s == doctest::Approx(60e-6));
  CHECK(c.cpu_s == doctest::Approx(6e-3 + 1.5e-3));
  CHECK(c.total() == doctest::Approx(kCommNone - 20e-6));
}

TEST_CASE(
    "an all-reduce among time-sliced ranks waits a slice per thread on a core, at most a compute") {
  TimingInputs in = four_ranks();  // compute 1 + 2 + 0.5 = 3.5 ms
  in.yield_wait_s = 1e-3;
  const CommCost alone = allreduce_cost(in, quantize8(), 1e6);  // a core per compute thread
  CHECK(alone.total() == doctest::Approx(transfer_cost(in, quantize8(), 1e6).total()));
  CHECK(oversubscribed_wait_s(in) == 0);
  in.crowding = 2;  // 4 ranks on 2 cores: 2 slices of 1 ms
  const CommCost crowded = allreduce_cost(in, quantize8(), 1e6);
  CHECK(crowded.wait_s == doctest::Approx(alone.wait_s + 2e-3));
  CHECK(crowded.cpu_s == doctest::Approx(alone.cpu_s));
  CHECK(oversubscribed_wait_s(in) == doctest::Approx(2e-3));
  // Slices longer than the compute: the last rank is at most a whole compute late.
  in.yield_wait_s = 3e-3;
  CHECK(oversubscribed_wait_s(in) == doctest::Approx(3.5e-3));
  // A straggler's compute is the longer one.
  in.rank_slowdown = {1, 2};
  CHECK(oversubscribed_wait_s(in) == doctest::Approx(6e-3));
  // Nothing to reduce, nothing to wait for.
  CHECK(allreduce_cost(in, quantize8(), 0).total() == 0);
  in.p = 1;
  CHECK(allreduce_cost(in, quantize8(), 1e6).total() == 0);
}
