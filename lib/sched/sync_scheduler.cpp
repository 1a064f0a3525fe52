#include "sched/sync_scheduler.h"

#include <cmath>  // isfinite

#include "core/error.h"
#include "core/timer.h"  // ScopedTimer

namespace dtrain {

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
    {
      ScopedTimer t(&stats.forward_s);
      ctx_.model.forward(batch.images, batch.labels);
    }
    {
      // Scaling by the global batch makes the sum over ranks the global-batch mean.
      ScopedTimer t(&stats.backward_s);
      ctx_.model.backward(1.0f / static_cast<float>(rows * world));
    }
    if (world > 1) {
      ScopedTimer t(&stats.comm_s);
      ctx_.comm.allreduce_sum(ctx_.model.gradients());
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
  return stats;
}

}  // namespace dtrain
