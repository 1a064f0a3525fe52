// Timing phases as data: the one list of what a rank's time is spent on. timing.csv's columns,
// EpochStats, the timers and the trace's span names all come from this list, so adding a phase
// is one line here. Every timer of a phase also records its span (core/trace.h), so the trace
// and timing.csv never disagree: an epoch's spans add up to its timing.csv row. (The trace also
// shows phases outside epochs, which timing.csv leaves out: communication that evaluation waits
// for, say.)
#pragma once
#include <array>
#include <cstddef>  // size_t
#include <cstdint>  // uint8_t: a trace event code
#include <string_view>

#include "core/timer.h"  // Clock, seconds_since
#include "core/trace.h"  // trace::record: every timed phase is also a span

namespace dtrain {

enum class Phase : unsigned char { data, forward, backward, update, compress, comm, wait };

inline constexpr size_t kPhaseCount = 7;
// timing.csv's column of each phase is its name + "_s", in this order.
inline constexpr std::array<std::string_view, kPhaseCount> kPhaseNames{
    "data", "forward", "backward", "update", "compress", "comm", "wait"};

constexpr std::string_view phase_name(Phase p) {
  return kPhaseNames[static_cast<size_t>(p)];
}

// Stretches of a run that are not phases but help read a trace: an epoch and an evaluation
// enclose phases; `load` is a loader thread preparing a batch (the compute thread's wait for it
// is the data phase). A trace event's code is the phase's index, or kPhaseCount + the region's.
enum class Region : unsigned char { epoch, evaluate, load, checkpoint };
inline constexpr std::array<std::string_view, 4> kRegionNames{"epoch", "evaluate", "load",
                                                              "checkpoint"};

constexpr uint8_t trace_code(Phase p) {
  return static_cast<uint8_t>(p);
}
constexpr uint8_t trace_code(Region r) {
  return static_cast<uint8_t>(kPhaseCount + static_cast<size_t>(r));
}
// The span name of a trace event's code.
constexpr std::string_view trace_name(uint8_t code) {
  return code < kPhaseCount ? kPhaseNames[code] : kRegionNames[code - kPhaseCount];
}

// Seconds spent in each phase.
struct PhaseTimes {
  std::array<double, kPhaseCount> seconds{};

  double& operator[](Phase p) { return seconds[static_cast<size_t>(p)]; }
  double operator[](Phase p) const { return seconds[static_cast<size_t>(p)]; }
  double total() const {
    double sum = 0;
    for (double s : seconds) sum += s;
    return sum;
  }
};

// Adds the lifetime of the scope to one phase and records it as a span of the calling thread:
// `{ PhaseTimer t(stats.phases, Phase::forward); }`, or into any seconds counter of that phase.
class PhaseTimer {
 public:
  PhaseTimer(PhaseTimes& times, Phase phase) : PhaseTimer(times[phase], phase) {}
  PhaseTimer(double& seconds, Phase phase) : sink_(&seconds), phase_(phase), start_(Clock::now()) {}
  ~PhaseTimer() {
    const Clock::time_point end = Clock::now();
    *sink_ += std::chrono::duration<double>(end - start_).count();
    trace::record(trace_code(phase_), start_, end);
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double* sink_;
  Phase phase_;
  Clock::time_point start_;
};

// Records the lifetime of the scope as a span only: a region, or a phase that no timing.csv
// column counts.
class TraceScope {
 public:
  explicit TraceScope(Region region, int32_t arg = 0) : code_(trace_code(region)), arg_(arg) {}
  explicit TraceScope(Phase phase) : code_(trace_code(phase)) {}
  ~TraceScope() { trace::record(code_, start_, Clock::now(), arg_); }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  uint8_t code_;
  int32_t arg_ = 0;
  Clock::time_point start_ = Clock::now();
};

}  // namespace dtrain
