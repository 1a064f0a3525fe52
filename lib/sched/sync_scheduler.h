// D-Sync: every rank computes the gradient of its share of the global batch, the gradients are
// summed over ranks, and every rank applies the identical update (Pipe-SGD paper, Fig. 2a).
#pragma once
#include "sched/scheduler.h"  // Scheduler

namespace dtrain {

class SyncScheduler final : public Scheduler {
 public:
  using Scheduler::Scheduler;
  std::string name() const override { return "sync"; }
  EpochStats run_epoch(Loader& loader, int epoch, int64_t max_iterations) override;
};

}  // namespace dtrain
