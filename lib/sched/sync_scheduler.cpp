#include "sched/sync_scheduler.h"

#include <cmath>  // isfinite

#include "core/error.h"
#include "core/timer.h"  // ScopedTimer

namespace dtrain {

SyncScheduler::SyncScheduler(SchedulerContext ctx) : Scheduler(std::move(ctx)) {
  if (ctx_.comm.size() > 1)
    allreducer_ = std::make_unique<GradientAllreducer>(ctx_.comm, ctx_.compression,
                                                       ctx_.model.num_parameters());
}

std::string SyncScheduler::describe() const {
  return allreducer_ ? "sync (D-Sync) over " + std::to_string(ctx_.comm.size()) + " ranks, " +
                           allreducer_->describe()
                     : "sync (one rank)";
}

EpochStats SyncScheduler::run_epoch(Loader& loader, int epoch, int64_t max_iterations) {
  EpochStats stats;
  const auto epoch_start = Clock::now();
  const int world = ctx_.comm.size();
  Batch batch;
  for (int64_t i = 0; max_iterations <= 0 || i < max_iterations; ++i) {
    {
      ScopedTimer t(&stats.data_s);
      if (!loader.next(batch)) break;
    }
    const int64_t rows = batch.labels.numel();
    const double compute_before = stats.forward_s + stats.backward_s;
    {
      ScopedTimer t(&stats.forward_s);
      ctx_.model.forward(batch.images, batch.labels);
    }
    {
      // Scaling by the global batch makes the sum over ranks the global-batch mean.
      ScopedTimer t(&stats.backward_s);
      ctx_.model.backward(1.0f / static_cast<float>(rows * world));
    }
    stats.backward_s += emulate_straggler(stats.forward_s + stats.backward_s - compute_before);
    if (allreducer_) {
      ScopedTimer t(&stats.wait_s);  // nothing to overlap with in D-Sync: all of it is exposed
      allreducer_->start(ctx_.model.gradients()).get();
    }
    {
      ScopedTimer t(&stats.update_s);
      ctx_.optimizer.step(lr_at(epoch, i));
    }
    const LossStats ls = ctx_.model.last_stats();
    if (!std::isfinite(ls.loss_sum))
      throw Error("training diverged: the loss is " + std::to_string(ls.loss_sum) + " at epoch " +
                  std::to_string(epoch + 1) + ", iteration " + std::to_string(i + 1) +
                  " (lower optimizer.lr?)");
    stats.loss_sum += ls.loss_sum;
    stats.correct += ls.correct;
    stats.samples += rows;
    ++stats.iterations;
    if (ctx_.on_iteration)
      ctx_.on_iteration({epoch, i + 1, rows ? ls.loss_sum / rows : 0.0, rows * world});
  }
  stats.wall_s = seconds_since(epoch_start);
  if (allreducer_) allreducer_->take_times(&stats.comm_s, &stats.compress_s);
  return stats;
}

}  // namespace dtrain
