// D-Sync: every rank computes the gradient of its share of the global batch, the gradients are
// summed over ranks, and every rank applies the identical update (Pipe-SGD paper, Fig. 2a).
#pragma once
#include <memory>

#include "comm/gradient_allreducer.h"  // GradientAllreducer
#include "sched/scheduler.h"           // Scheduler

namespace dtrain {

class SyncScheduler final : public Scheduler {
 public:
  explicit SyncScheduler(SchedulerContext ctx);
  std::string name() const override { return "sync"; }
  std::string describe() const override;
  EpochStats run_epoch(Loader& loader, int epoch, int64_t max_iterations) override;

 private:
  std::unique_ptr<GradientAllreducer> allreducer_;  // null on one rank
};

}  // namespace dtrain
