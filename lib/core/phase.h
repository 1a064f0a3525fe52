// Timing phases as data: the one list of what a rank's time is spent on. timing.csv's columns,
// EpochStats, the timers and (later) the trace's span names all come from this list, so adding
// a phase is one line here.
#pragma once
#include <array>
#include <cstddef>  // size_t
#include <string_view>

#include "core/timer.h"  // Clock, seconds_since

namespace dtrain {

enum class Phase : unsigned char { data, forward, backward, update, compress, comm, wait };

inline constexpr size_t kPhaseCount = 7;
// timing.csv's column of each phase is its name + "_s", in this order.
inline constexpr std::array<std::string_view, kPhaseCount> kPhaseNames{
    "data", "forward", "backward", "update", "compress", "comm", "wait"};

constexpr std::string_view phase_name(Phase p) {
  return kPhaseNames[static_cast<size_t>(p)];
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

// Adds the lifetime of the scope to one phase: `{ PhaseTimer t(stats.phases, Phase::forward); }`.
class PhaseTimer {
 public:
  PhaseTimer(PhaseTimes& times, Phase phase) : sink_(&times[phase]), start_(Clock::now()) {}
  ~PhaseTimer() { *sink_ += seconds_since(start_); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double* sink_;
  Clock::time_point start_;
};

// One stretch of one thread's time in a phase (what a trace draws).
struct Span {
  Phase phase = Phase::comm;
  Clock::time_point begin, end;
};

}  // namespace dtrain
