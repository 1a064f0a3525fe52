// The one rule for a link's cost: cluster.link's numbers with the measured overshoot and copy
// when emulated, else the measured hand-off and copy.
#include <doctest/doctest.h>

#include "plan/link_cost.h"
#include "plan/profiler.h"  // TransportTimes

using namespace dtrain;

namespace {

TransportTimes measured() {
  TransportTimes t;
  t.copy_s_per_byte = 0.1e-9;
  t.handoff_s = 0.5e-6;
  t.overshoot_s = 60e-6, t.overshoot_per_s = 0.01;
  return t;
}

}  // namespace

TEST_CASE(
    "an emulated link sleeps latency + bytes / bandwidth, late by the overshoot, then copies") {
  const LinkCost link = link_cost(LinkModel{125e6, 50e-6}, measured());
  CHECK(link.emulated());
  CHECK(link.latency_s == 50e-6);
  CHECK(link.sleep_s_per_byte() == doctest::Approx(8e-9));
  CHECK(link.transfer_bytes_per_s() == 125e6);
  const CommCost m = link.message(1000);
  CHECK(m.wait_s == doctest::Approx((50e-6 + 8e-6) * 1.01 + 60e-6));
  CHECK(m.cpu_s == doctest::Approx(1000 * 0.1e-9));
}

TEST_CASE("without cluster.link a message is the hand-off and a copy, and nothing sleeps") {
  const LinkCost link = link_cost(std::nullopt, measured());
  CHECK_FALSE(link.emulated());
  CHECK(link.latency_s == 0.5e-6);
  CHECK(link.sleep_s_per_byte() == 0);
  CHECK(link.overshoot_s == 0);
  CHECK(link.transfer_bytes_per_s() == doctest::Approx(1e10));
  const CommCost m = link.message(1000);
  CHECK(m.wait_s == doctest::Approx(0.5e-6));
  CHECK(m.cpu_s == doctest::Approx(1000 * 0.1e-9));
}
