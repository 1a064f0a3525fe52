#include "optim/lr_schedule.h"

#include <cmath>  // pow, cos, floor

#include "core/error.h"

namespace dtrain {

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(std::move(options)) {
  const auto& o = options_;
  DTRAIN_CHECK(o.name == "constant" || o.name == "step" || o.name == "multistep" ||
               o.name == "cosine")
      << "unknown learning-rate schedule '" << o.name << "'";
  DTRAIN_CHECK(o.every_epochs >= 1 && o.total_epochs >= 1) << "schedule lengths must be >= 1";
}

double LrSchedule::lr_at(double epoch) const {
  const auto& o = options_;
  double lr = o.base_lr;
  const int whole = static_cast<int>(std::floor(epoch));
  if (o.name == "step") {
    lr *= std::pow(o.gamma, whole / o.every_epochs);
  } else if (o.name == "multistep") {
    for (int m : o.milestones)
      if (whole >= m) lr *= o.gamma;
  } else if (o.name == "cosine") {
    const double t = std::min(epoch / o.total_epochs, 1.0);
    lr = o.min_lr + (o.base_lr - o.min_lr) * 0.5 * (1.0 + std::cos(M_PI * t));
  }
  if (epoch < o.warmup_epochs) {
    const double f =
        o.warmup_start_factor + (1.0 - o.warmup_start_factor) * epoch / o.warmup_epochs;
    lr *= f;
  }
  return lr;
}

}  // namespace dtrain
