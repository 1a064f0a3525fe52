#include "sched/sync_scheduler.h"

#include "core/error.h"
#include "core/timer.h"  // ScopedTimer

namespace dtrain {

SyncScheduler::SyncScheduler(SchedulerContext ctx) : Scheduler(std::move(ctx)) {
  if (ctx_.comm.size() > 1)
    allreducer_ = std::make_unique<GradientAllreducer>(
        ctx_.comm, ctx_.compression, ctx_.model.num_parameters(), gradient_placement());
}

std::string SyncScheduler::describe() const {
  return allreducer_ ? "sync (D-Sync) over " + std::to_string(ctx_.comm.size()) + " ranks, " +
                           allreducer_->describe()
                     : "sync (one rank)";
}

EpochStats SyncScheduler::run_epoch(Loader& loader, int epoch, int64_t max_iterations) {
  EpochStats stats;
  const auto epoch_start = Clock::now();
  Batch batch;
  for (int64_t i = 0; max_iterations <= 0 || i < max_iterations; ++i) {
    {
      ScopedTimer t(&stats.data_s);
      if (!loader.next(batch)) break;
    }
    compute_gradients(batch, stats);
    if (allreducer_) {
      ScopedTimer t(&stats.wait_s);  // nothing to overlap with in D-Sync: all of it is exposed
      allreducer_->start(trainable_gradients()).get();
    }
    {
      ScopedTimer t(&stats.update_s);
      ctx_.optimizer.step(lr_at(epoch, i));
    }
    finish_iteration(epoch, i, batch.labels.numel(), stats);
  }
  stats.wall_s = seconds_since(epoch_start);
  if (allreducer_) allreducer_->take_times(&stats.comm_s, &stats.compress_s);
  return stats;
}

}  // namespace dtrain
