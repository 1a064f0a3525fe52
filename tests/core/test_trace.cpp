// The trace recorder: spans only while recording, per-thread tracks, more chunks than reserved,
// and the phase timers feeding both timing.csv's seconds and the trace.
#include <doctest/doctest.h>

#include <thread>

#include "core/phase.h"
#include "core/trace.h"

using namespace dtrain;

TEST_CASE("a thread records only while attached and while the recorder records") {
  trace::Recorder recorder(8);
  PhaseTimes times;
  { PhaseTimer t(times, Phase::forward); }  // no track yet: timed, not recorded
  CHECK(times[Phase::forward] > 0);
  {
    trace::ThreadScope scope(&recorder, "compute");
    CHECK(trace::current_recorder() == &recorder);
    { PhaseTimer t(times, Phase::forward); }  // not recording yet
    recorder.set_recording(true);
    { PhaseTimer t(times, Phase::backward); }
    { TraceScope epoch(Region::epoch, 3); }
    recorder.set_recording(false);
    { PhaseTimer t(times, Phase::update); }
  }
  CHECK(trace::current_recorder() == nullptr);
  const auto tracks = recorder.tracks();
  REQUIRE(tracks.size() == 1);
  const trace::ThreadTrack& t = *tracks[0];
  REQUIRE(t.size() == 2);
  CHECK(trace_name(t[0].what) == "backward");
  CHECK(trace_name(t[1].what) == "epoch");
  CHECK(t[1].arg == 3);
  CHECK(t[0].end_ns >= t[0].begin_ns);
  // The timer's seconds are the span's length (the same two clock readings).
  CHECK(times[Phase::backward] == doctest::Approx(1e-9 * (t[0].end_ns - t[0].begin_ns)));
}

TEST_CASE(
    "threads started by a traced thread get tracks of their own; tracks grow past the "
    "reservation") {
  trace::Recorder recorder(16);
  recorder.set_recording(true);
  trace::ThreadScope scope(&recorder, "compute");
  const size_t many = trace::ThreadTrack::kChunkEvents * 2 + 5;
  std::thread worker([parent = trace::current_recorder(), many] {
    trace::ThreadScope traced(parent, "comm");
    for (size_t i = 0; i < many; ++i)
      trace::record(trace_code(Phase::comm), Clock::now(), Clock::now(), 0);
  });
  worker.join();
  const auto tracks = recorder.tracks();
  REQUIRE(tracks.size() == 2);
  CHECK(tracks[1]->name() == "comm");
  CHECK(tracks[1]->index() == 1);
  CHECK(tracks[1]->size() == many);
  CHECK(tracks[1]->dropped() == 0);
  CHECK(trace_name((*tracks[1])[many - 1].what) == "comm");
  CHECK(tracks[0]->size() == 0);
}

TEST_CASE("an untraced thread's spans go nowhere") {
  trace::ThreadScope none(nullptr, "compute");
  CHECK(trace::current_recorder() == nullptr);
  PhaseTimes times;
  { PhaseTimer t(times, Phase::wait); }
  CHECK(times[Phase::wait] >= 0);
}
