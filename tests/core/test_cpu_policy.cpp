// core/cpu_policy.h: the denormal flush and the compute threads' batch policy, each checked on a
// thread of its own (the settings are per thread, inherited by the threads a thread starts).
#include <doctest/doctest.h>

#include <cfloat>  // FLT_MIN
#include <thread>

#include "core/cpu_policy.h"

using namespace dtrain;

namespace {
// Through volatile: the compiler must compute these at run time, under the thread's mode.
float product(float a, float b) {
  volatile float x = a, y = b;
  return x * y;
}
}  // namespace

TEST_CASE("flush_denormals: denormal results and inputs become zero, in threads started after") {
  std::thread([] {
    const float denormal = product(FLT_MIN, 0.25f);
    CHECK(denormal > 0.0f);  // IEEE gradual underflow before the flush
    CHECK(!flushes_denormals());
    flush_denormals();
    CHECK(flushes_denormals());
    CHECK(product(FLT_MIN, 0.25f) == 0.0f);        // FTZ: the result
    CHECK(product(denormal, 4.0f) == 0.0f);        // DAZ: the input
    CHECK(product(FLT_MIN, 2.0f) == 2 * FLT_MIN);  // normal numbers are untouched
    bool child_flushes = false;
    std::thread([&] { child_flushes = flushes_denormals(); }).join();
    CHECK(child_flushes);
  }).join();
}

TEST_CASE("run_as_compute_thread: batch policy, inherited; a latency-bound thread leaves it") {
  std::thread([] {
    CHECK(!runs_as_compute_thread());
    REQUIRE(run_as_compute_thread());  // no privilege needed: the priority stays 0
    CHECK(runs_as_compute_thread());
    bool child_batch = false, child_after = true;
    std::thread([&] {
      child_batch = runs_as_compute_thread();
      run_as_latency_bound_thread();
      child_after = runs_as_compute_thread();
    }).join();
    CHECK(child_batch);
    CHECK(!child_after);
    CHECK(runs_as_compute_thread());  // the parent's own policy is unchanged
  }).join();
}
