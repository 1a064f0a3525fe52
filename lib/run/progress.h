// What a person watching a run sees: on a terminal a single self-updating line (epoch,
// iteration, loss, samples/s, ETA), otherwise a plain log line every
// train.log_every_iterations, so that redirected output and CI logs stay readable. Rank 0 only.
#pragma once
#include <algorithm>  // max
#include <cstdint>
#include <string>

#include "core/timer.h"       // Clock
#include "sched/scheduler.h"  // IterationReport

namespace dtrain {

// --progress: `auto` draws a bar when the output a person reads is a terminal and logs lines
// otherwise.
enum class ProgressMode { auto_, bar, log, none };

// auto → bar or log. Under mpirun a rank's stdout is Open MPI's pseudo-terminal whatever
// mpirun's own stdout is (`mpirun ... > log` would fill the log with escape codes), so auto
// asks whether the launcher's stdout is a terminal: the mpirun among this process's ancestors,
// or log when there is none on this host.
ProgressMode resolve_progress_mode(ProgressMode mode);

// The ETA: `done` iterations took `elapsed_s`, `left` more are to come at that pace. Negative
// when nothing is known yet (no iteration done).
double eta_seconds(double elapsed_s, int64_t done, int64_t left);

class Progress {
 public:
  Progress(ProgressMode mode, int epochs, int64_t iterations_per_epoch, int64_t max_iterations,
           int64_t log_every_iterations);
  void iteration(const IterationReport& report);
  // A resumed run: `epochs_done` (fractional: the checkpoint's epoch and its part of the next)
  // were done before; the ETA counts only the iterations after them.
  void resume_at(double epochs_done);
  // The iterations still to come, as the ETA counts them.
  int64_t iterations_left() const {
    return std::max<int64_t>(0, total_iterations_ - before_ - done_);
  }
  // A language model's samples are windows of `tokens` tokens: the line shows tokens/s and the
  // loss's perplexity. 0 (images): samples/s.
  void set_tokens_per_sample(int64_t tokens) { tokens_per_sample_ = tokens; }
  // Samples/s and ETA count from here (set-up time excluded).
  void restart_clock() { start_ = last_draw_ = Clock::now(); }
  // Ends the progress line before other output.
  void clear_line();

 private:
  ProgressMode mode_;  // bar, log or none
  int epochs_;
  int64_t iterations_per_epoch_, total_iterations_, log_every_;
  int64_t done_ = 0, samples_ = 0;  // since this process started training
  int64_t before_ = 0;              // done before (a resumed run's checkpoint)
  Clock::time_point start_, last_draw_;
  // The running mean of this epoch's losses (rank 0's batches): at the epoch's end it is what
  // accuracy.csv's train_loss reports, but of rank 0's shard.
  int epoch_ = -1;
  double epoch_loss_sum_ = 0;
  int64_t epoch_iterations_ = 0;  // those with a loss (a pipeline's input stage: the losses
                                  // that came back, a pipeline's depth late)
  bool line_open_ = false;
  int64_t tokens_per_sample_ = 0;
};

// How a log line states a throughput and a loss: "1234 samples/s" or, for a language model
// (windows of `tokens_per_sample` tokens), "78976 tokens/s"; "loss 1.2345" or
// "loss 1.2345 (ppl 3.44)" — the perplexity exp(loss) of a mean per-token cross-entropy.
std::string format_rate(double samples_per_s, int64_t tokens_per_sample);
std::string format_loss(const char* what, double loss, int64_t tokens_per_sample);

}  // namespace dtrain
