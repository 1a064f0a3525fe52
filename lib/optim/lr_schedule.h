// Learning-rate schedules as pure functions of training progress (fractional epochs), so every
// rank and every scheduler computes the same rate for the same iteration without shared state.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

struct LrScheduleOptions {
  std::string name = "constant";  // constant | step | multistep | cosine
  double base_lr = 0.1;
  int every_epochs = 30;        // step: multiply by gamma every this many epochs
  double gamma = 0.1;           // step, multistep
  std::vector<int> milestones;  // multistep: epochs at which to multiply by gamma
  double min_lr = 0.0;          // cosine: the rate at the end of training
  int total_epochs = 1;         // cosine: length of the annealing
  double warmup_epochs = 0.0;   // linear warm-up, composes with any of the above
  double warmup_start_factor = 0.1;
};

class LrSchedule {
 public:
  explicit LrSchedule(LrScheduleOptions options);
  // The rate at `epoch` (fractional: epoch + iteration / iterations_per_epoch). Step-like
  // schedules change at whole epochs, cosine and warm-up every iteration.
  double lr_at(double epoch) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

}  // namespace dtrain
