// trace.json's clock alignment: a rank whose clock runs ahead of rank 0's by a known amount is
// measured to be that far ahead, and its spans are written on rank 0's clock.
#include <doctest/doctest.h>

#include <string>

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
  const int64_t offset = measure_clock_offset(*comm, [skew] { return now_ns() + skew; });
  // Local ranks answer within well under 50 ms, even oversubscribed.
  CHECK(std::llabs(offset + skew) < 50'000'000);
  if (comm->rank() == 0) CHECK(offset == 0);
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
