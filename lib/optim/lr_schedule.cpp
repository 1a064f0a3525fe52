#include "optim/lr_schedule.h"

#include <algorithm>  // clamp
#include <cmath>      // pow, cos, floor

#include "core/error.h"

namespace dtrain {

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(std::move(options)) {
  const auto& o = options_;
  DTRAIN_CHECK(o.name == "constant" || o.name == "step" || o.name == "multistep" ||
               o.name == "cosine")
      << "unknown learning-rate schedule '" << o.name << "'";
  DTRAIN_CHECK(o.every_epochs >= 1 && o.total_epochs >= 1) << "schedule lengths must be >= 1";
  DTRAIN_CHECK(o.warmup_iterations >= 0 && o.total_iterations >= 0)
      << "iteration counts must be >= 0";
}

bool LrSchedule::counts_iterations() const {
  const auto& o = options_;
  return o.warmup_iterations > 0 || (o.name == "cosine" && o.total_iterations > 0);
}

namespace {

double cosine(double base_lr, double min_lr, double t) {
  return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(M_PI * t));
}

}  // namespace

double LrSchedule::lr_at(double epoch, int64_t iteration) const {
  const auto& o = options_;
  if (!counts_iterations()) return lr_at(epoch);
  double lr;
  if (o.name == "cosine" && o.total_iterations > 0) {
    // nanoGPT's decay_ratio: 0 until the warm-up ends, 1 from total_iterations on.
    const int64_t span = o.total_iterations - o.warmup_iterations;
    const int64_t into = iteration - o.warmup_iterations;
    const double t = into <= 0 ? 0.0 : span <= 0 ? 1.0 : std::clamp(double(into) / span, 0.0, 1.0);
    lr = cosine(o.base_lr, o.min_lr, t);
    if (epoch < o.warmup_epochs)
      lr *= o.warmup_start_factor + (1.0 - o.warmup_start_factor) * epoch / o.warmup_epochs;
  } else {
    lr = lr_at(epoch);
  }
  if (iteration < o.warmup_iterations)
    lr *= static_cast<double>(iteration + 1) / static_cast<double>(o.warmup_iterations + 1);
  return lr;
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
