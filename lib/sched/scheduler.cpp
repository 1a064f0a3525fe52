#include "sched/scheduler.h"

#include <chrono>
#include <cmath>   // isfinite
#include <thread>  // sleep_for

#include "core/error.h"
#include "core/timer.h"  // ScopedTimer

namespace dtrain {

double Scheduler::emulate_straggler(double seconds) const {
  if (ctx_.compute_slowdown <= 1.0 || seconds <= 0) return 0;
  const double extra = (ctx_.compute_slowdown - 1.0) * seconds;
  std::this_thread::sleep_for(std::chrono::duration<double>(extra));
  return extra;
}

void Scheduler::compute_gradients(const Batch& batch, EpochStats& stats,
                                  const std::function<void(int64_t)>& on_ready) {
  const int64_t rows = batch.labels.numel();
  const double before = stats.forward_s + stats.backward_s;
  {
    ScopedTimer t(&stats.forward_s);
    ctx_.model.forward(batch.images, batch.labels);
  }
  {
    // Scaling by the global batch makes the sum over ranks the global-batch mean.
    ScopedTimer t(&stats.backward_s);
    ctx_.model.backward(1.0f / static_cast<float>(rows * ctx_.comm.size()), on_ready);
  }
  stats.backward_s += emulate_straggler(stats.forward_s + stats.backward_s - before);
}

Tensor Scheduler::trainable_gradients() const {
  const Tensor& g = ctx_.model.gradients();
  const int64_t offset = ctx_.model.trainable_offset();
  return g.slice(offset, {g.numel() - offset});
}

void Scheduler::finish_iteration(int epoch, int64_t i, int64_t rows, EpochStats& stats) {
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
    ctx_.on_iteration({epoch, i + 1, rows ? ls.loss_sum / rows : 0.0, rows * ctx_.comm.size()});
}

}  // namespace dtrain
