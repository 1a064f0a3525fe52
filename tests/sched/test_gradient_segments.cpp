// GradientSegments: a segment's all-reduce starts in the very call that reports its range final
// (backward's on_ready), last segment first, and each segment starts once. Observed without any
// timing: the futures start_ready hands back, and the bytes a counting Comm sees.
#include <doctest/doctest.h>

#include <future>
#include <vector>

#include "comm/comm.h"
#include "comm/gradient_allreducer.h"
#include "delaying_comm.h"  // DelayingComm: with no delay it only counts
#include "sched/gradient_segments.h"

using namespace dtrain;

TEST_CASE("a segment starts as soon as backward reports its range final, last segment first") {
  auto local = make_local_comm();
  test::DelayingComm counting(*local, 0);
  GradientAllreducer allreducer(counting, "none", 100);
  Tensor gradients = Tensor::zeros({100});
  const GradientSegments segments(0, 100, 4);  // [0, 25) [25, 50) [50, 75) [75, 100)
  REQUIRE(segments.size() == 4);
  std::vector<std::future<void>> inflight;
  size_t started = 0;
  // Backward reports decreasing offsets: gradients[offset, 100) are final.
  auto report = [&](int64_t offset) {
    segments.start_ready(allreducer, gradients, offset, started, inflight);
    return inflight.size();
  };
  CHECK(report(80) == 0);  // only part of the last segment is final
  CHECK(report(75) == 1);
  CHECK(report(75) == 1);  // reported again: nothing starts twice
  CHECK(report(30) == 2);  // [50, 75) is final, [25, 50) not yet
  CHECK(report(0) == 4);
  CHECK(started == 4);
  for (std::future<void>& f : inflight) f.get();
  CHECK(counting.traffic().allreduces.load() == 4);
  CHECK(counting.traffic().allreduce_bytes.load() == 100 * 4);  // every float once
}

TEST_CASE("one segment: the whole trainable range, after backward") {
  auto local = make_local_comm();
  test::DelayingComm counting(*local, 0);
  GradientAllreducer allreducer(counting, "none", 100);
  Tensor gradients = Tensor::zeros({100});
  const GradientSegments whole(40, 100, 1);  // the first 40 floats are frozen
  REQUIRE(whole.size() == 1);
  CHECK(whole.begin() == 40);
  std::vector<std::future<void>> inflight;
  size_t started = 0;
  whole.start_ready(allreducer, gradients, 41, started, inflight);
  CHECK(inflight.empty());
  whole.start_ready(allreducer, gradients, whole.begin(), started, inflight);
  REQUIRE(inflight.size() == 1);
  inflight[0].get();
  CHECK(counting.traffic().allreduce_bytes.load() == 60 * 4);
}
