// Learning-rate schedules as pure functions of training progress (fractional epochs, and the
// iteration over the run for the parts counted in iterations), so every rank and every scheduler
// computes the same rate for the same iteration without shared state.
#pragma once
#include <cstdint>  // int64_t
#include <string>
#include <vector>

namespace dtrain {

struct LrScheduleOptions {
  std::string name = "constant";  // constant | step | multistep | cosine
  double base_lr = 0.1;
  int every_epochs = 30;          // step: multiply by gamma every this many epochs
  double gamma = 0.1;             // step, multistep
  std::vector<int> milestones{};  // multistep: epochs at which to multiply by gamma
  double min_lr = 0.0;            // cosine: the rate at the end of training
  int total_epochs = 1;           // cosine: length of the annealing
  double warmup_epochs = 0.0;     // linear warm-up, composes with any of the above
  double warmup_start_factor = 0.1;
  // Counted in iterations (0-based, over the run), as nanoGPT's get_lr: a linear warm-up
  // lr·(it + 1)/(warmup_iterations + 1) over the first warmup_iterations, composing with any of
  // the above; cosine: annealed over iterations [warmup_iterations, total_iterations) instead of
  // the epochs when total_iterations > 0, min_lr from then on.
  int64_t warmup_iterations = 0;
  int64_t total_iterations = 0;
};

class LrSchedule {
 public:
  explicit LrSchedule(LrScheduleOptions options);
  // The rate at `epoch` (fractional: epoch + iteration / iterations_per_epoch). Step-like
  // schedules change at whole epochs, cosine and warm-up every iteration.
  double lr_at(double epoch) const;
  // The rate at iteration `iteration` of the run (0-based), which falls at `epoch` (fractional).
  // Without parts counted in iterations (counts_iterations) it is lr_at(epoch), exactly.
  double lr_at(double epoch, int64_t iteration) const;
  bool counts_iterations() const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

}  // namespace dtrain
