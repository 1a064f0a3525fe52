// trace.json's clock alignment: a rank whose clock runs ahead of rank 0's by a known amount is
// measured to be that far ahead, and its spans are written on rank 0's clock.
#include <doctest/doctest.h>

#include <algorithm>  // min
#include <string>
#include <vector>

#include "comm/mpi_comm.h"  // make_mpi_comm
#include "core/phase.h"
#include "run/run_trace.h"

using namespace dtrain;

namespace {
int64_t now_ns() {
  return Clock::now().time_since_epoch().count();
}
}  // namespace

TEST_CASE("the clock offset against rank 0 is measured within the round trip") {
  auto comm = make_mpi_comm();
  const int64_t skew = comm->rank() * 3'000'000'000LL;  // rank r's clock is r · 3 s ahead
  std::vector<int64_t> readings;                        // this rank's clock, as the measure read it
  const int64_t offset = measure_clock_offset(*comm, [&] {
    readings.push_back(now_ns() + skew);
    return readings.back();
  });
  if (comm->rank() == 0) {
    CHECK(offset == 0);
    return;
  }
  // A rank reads its clock before sending and after the answer, in turns: Cristian's bound, the
  // error is within half of the shortest round trip (however long a busy machine made them all).
  REQUIRE(readings.size() % 2 == 0);
  REQUIRE(!readings.empty());
  int64_t shortest = readings[1] - readings[0];
  for (size_t i = 0; i < readings.size(); i += 2)
    shortest = std::min(shortest, readings[i + 1] - readings[i]);
  CHECK(std::llabs(offset + skew) <= shortest / 2 + 1);
}

TEST_CASE("a rank's spans are written on rank 0's clock, in microseconds from the origin") {
  auto comm = make_mpi_comm();
  trace::Recorder recorder(16);
  recorder.set_recording(true);
  {
    trace::ThreadScope scope(&recorder, "compute");
    const Clock::time_point begin{std::chrono::nanoseconds(5'000'000'123)};
    trace::record(trace_code(Phase::forward), begin, begin + std::chrono::nanoseconds(2'500));
  }
  const int64_t offset = -1'000'000'000, origin = 2'000'000'000;  // 5.000000123 s → 2.000000123
  const std::string json = trace_events_json(recorder, comm->rank(), "host-a", offset, origin);
  const std::string pid = std::to_string(comm->rank());
  CHECK(json.find("\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid) != std::string::npos);
  CHECK(json.find("\"args\":{\"name\":\"rank " + pid + " (host-a)\"}") != std::string::npos);
  CHECK(json.find("\"args\":{\"name\":\"compute\"}") != std::string::npos);
  CHECK(json.find("{\"name\":\"forward\",\"cat\":\"phase\",\"ph\":\"X\",\"pid\":" + pid +
                  ",\"tid\":1,\"ts\":2000000.123,\"dur\":2.500}") != std::string::npos);
}
