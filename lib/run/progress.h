// What a person watching a run sees: on a terminal a single self-updating line (epoch,
// iteration, loss, samples/s, ETA), otherwise a plain log line every few iterations, so that
// redirected output and CI logs stay readable. Rank 0 only.
#pragma once
#include <cstdint>

#include "core/timer.h"       // Clock
#include "sched/scheduler.h"  // IterationReport

namespace dtrain {

class Progress {
 public:
  Progress(int epochs, int64_t iterations_per_epoch, int64_t max_iterations,
           int64_t log_every_iterations);
  void iteration(const IterationReport& report);
  // Samples/s and ETA count from here (set-up time excluded).
  void restart_clock() { start_ = last_draw_ = Clock::now(); }
  // Ends the progress line before other output.
  void clear_line();

 private:
  bool tty_;
  int epochs_;
  int64_t iterations_per_epoch_, total_iterations_, log_every_;
  int64_t done_ = 0, samples_ = 0;
  Clock::time_point start_, last_draw_;
  double loss_ema_ = -1;
  bool line_open_ = false;
};

}  // namespace dtrain
