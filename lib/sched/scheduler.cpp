#include "sched/scheduler.h"

#include <algorithm>  // min, max: micro-batches
#include <chrono>
#include <cmath>   // isfinite
#include <thread>  // sleep_for

#include "core/error.h"
#include "nn/graph.h"          // Graph::step: the dropout counter
#include "nn/model_weights.h"  // model_weights
#include "optim/clip.h"        // clip_grad_norm

namespace dtrain {

std::vector<DecayRange> decay_ranges(const std::vector<WeightSlot>& slots) {
  std::vector<DecayRange> ranges;
  for (const WeightSlot& slot : slots)
    if (!slot.buffer) ranges.push_back({slot.offset, slot.shape.numel(), slot.shape.rank() >= 2});
  return ranges;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerChoice& optimizer, Backend& backend,
                                          const Tensor& parameters, const Tensor& gradients,
                                          const std::vector<WeightSlot>& slots,
                                          int64_t trainable_offset) {
  return make_optimizer(optimizer, backend, parameters, gradients, decay_ranges(slots),
                        trainable_offset);
}

// ---- Scheduler -----------------------------------------------------------------------------

double Scheduler::emulate_straggler(double seconds) const {
  if (ctx_.compute_slowdown <= 1.0 || seconds <= 0) return 0;
  const double extra = (ctx_.compute_slowdown - 1.0) * seconds;
  std::this_thread::sleep_for(std::chrono::duration<double>(extra));
  return extra;
}

Tensor rows_of(const Tensor& t, int64_t first, int64_t count) {
  const int64_t per_row = t.shape()[0] > 0 ? t.numel() / t.shape()[0] : 0;
  return t.slice(first * per_row, t.shape().with_batch(count));
}

// Gradient accumulation (train.accumulation_steps N > 1) keeps one extra flat buffer,
// accumulated_, and adds gradients segment by segment as backward finishes them:
// - micro-batch 1 writes its gradient straight into accumulated_ (the model's gradients are
//   pointed there for its backward: no copy);
// - micro-batches 2..N-1 write into the model's gradients and each finished range is added into
//   accumulated_;
// - micro-batch N writes into the model's gradients and each finished range gets accumulated_
//   added to it: the model's gradients then hold the sum, where the scheduler expects the
//   step's gradient, and that range is reported to on_ready at once (its all-reduce starts
//   while backward goes on, as without accumulation).
// N − 1 passes of axpy over the parameters per step, each over a range backward has just
// written (still in cache), and one buffer of P floats. Layers accumulating into their gradient
// themselves would save the buffer but not the passes: oneDNN's and cuDNN's backward-weights
// primitives overwrite their output, so each layer would need a scratch gradient and an add of
// its own.
void Scheduler::compute_gradients(const Batch& batch, EpochStats& stats,
                                  const std::function<void(int64_t)>& on_ready) {
  const int64_t rows = batch.rows();
  // The loss of every micro-batch is scaled as the whole batch's: their sum is its gradient.
  const float scale = gradient_scale(rows);
  const int64_t steps = std::max<int64_t>(1, std::min<int64_t>(ctx_.accumulation_steps, rows));
  PhaseTimes& t = stats.phases;
  const auto start = Clock::now();
  Model& model = ctx_.model;
  for (int64_t k = 0; k < steps; ++k) {
    // Micro-batches of equal size (validation makes N divide the batch; a smaller batch, as
    // from a resumed partial epoch, splits as evenly as it can).
    const int64_t first = rows * k / steps, count = rows * (k + 1) / steps - first;
    const bool last = k + 1 == steps;
    {
      PhaseTimer timer(t, Phase::forward);
      if (steps == 1)
        model.forward(batch.images, batch.labels);
      else
        model.forward(rows_of(batch.images, first, count), rows_of(batch.labels, first, count));
    }
    PhaseTimer timer(t, Phase::backward);
    if (steps == 1) {
      model.backward(scale, on_ready);
    } else if (k == 0) {
      if (!accumulated_.defined()) accumulated_ = model.backend().zeros({model.num_parameters()});
      const Tensor gradients = model.gradients();  // the scheduler's buffer (pipe_sgd's slot)
      model.set_gradients(accumulated_);
      model.backward(scale);
      model.set_gradients(gradients);
    } else {
      accumulate_backward(scale, last, on_ready);
    }
    // The step's loss statistics: the micro-batches' sum, read once by finish_iteration.
    if (!last) model.hold_stats();
    // A straggler's extra compute time (the whole step's) counts, and shows in the trace, as
    // the last backward.
    if (last) emulate_straggler(seconds_since(start));
  }
}

void Scheduler::accumulate_backward(float scale, bool last,
                                    const std::function<void(int64_t)>& on_ready) {
  Model& model = ctx_.model;
  Backend& backend = model.backend();
  const Tensor& gradients = model.gradients();
  int64_t end = model.num_parameters();  // [offset, end): the range finished since the last call
  model.backward(scale, [&](int64_t offset) {
    if (offset < end) {
      const Tensor mine = gradients.slice(offset, {end - offset});
      const Tensor sum = accumulated_.slice(offset, {end - offset});
      if (last)
        backend.axpy(1.0f, sum, mine);  // the step's gradient, where the scheduler reads it
      else
        backend.axpy(1.0f, mine, sum);
      end = offset;
    }
    if (last && on_ready) on_ready(offset);
  });
}

void Scheduler::clip_gradients(const Tensor& gradients) const {
  if (ctx_.clip_grad_norm > 0) clip_grad_norm(ctx_.model.backend(), gradients, ctx_.clip_grad_norm);
}

NamedTensors Scheduler::weights() {
  flush();
  return ctx_.comm.rank() == 0 ? model_weights(ctx_.model) : NamedTensors{};
}

void Scheduler::write_weights(const WeightWriter& write) {
  const auto held = std::make_shared<NamedTensors>(weights());
  if (ctx_.comm.rank() != 0) return;
  std::vector<TensorSource> sources;
  for (const NamedTensor& t : *held)
    sources.push_back({t.name, t.shape, [&t](float* dst, int64_t begin, int64_t count) {
                         std::copy_n(t.values.begin() + begin, count, dst);
                       }});
  write(sources);
}

std::vector<TensorSource> Scheduler::model_weight_sources() {
  Model& model = ctx_.model;
  std::vector<TensorSource> sources;
  for (const WeightSlot& s : model.weight_slots()) {
    const Tensor& flat = s.buffer ? model.buffers() : model.parameters();
    const int64_t offset = s.offset;
    sources.push_back(
        {s.name, s.shape, [&model, flat, offset](float* dst, int64_t begin, int64_t count) {
           Backend& backend = model.backend();
           backend.copy(Tensor::borrow(dst, {count}), flat.slice(offset + begin, {count}));
           backend.synchronize();
         }});
  }
  return sources;
}

Tensor Scheduler::trainable_part(const Tensor& flat) const {
  const int64_t offset = ctx_.model.trainable_offset();
  return flat.slice(offset, {flat.numel() - offset});
}

void Scheduler::check_gradients(const Tensor& gradients, int64_t iteration) const {
  const double squares = ctx_.model.backend().dot(gradients, gradients);  // NaN, inf propagate
  if (!std::isfinite(squares))
    throw Error("training diverged: the gradient of iteration " + std::to_string(iteration) +
                " is not finite (NaN or inf) on rank " + std::to_string(ctx_.comm.rank()) +
                " (lower optimizer.lr?)");
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

void Scheduler::seek(Loader& loader, int epoch, int64_t first) {
  loader.start_epoch(epoch, first);
}

EvalResult Scheduler::evaluate(Loader& test) {
  flush();
  return evaluate_model(test);
}

LossStats test_sums(Model& model, Loader& test, Comm* lockstep) {
  const bool training = model.training();
  model.set_training(false);
  test.start_epoch(0);
  LossStats sums;
  Batch batch;
  // A model built for micro-batches (train.accumulation_steps) may be smaller than a test
  // batch: the batch then goes through in parts of the build batch.
  const int64_t most = model.graph().input_shape()[0];
  int64_t rows = 0, first = 0;  // the batch in hand, and the next row of it to forward
  Tensor images, labels;        // the last part forwarded: run again once this rank is done
  for (;;) {
    if (first >= rows && test.next(batch)) rows = batch.rows(), first = 0;
    const bool mine = first < rows;
    if (lockstep) {
      std::vector<double> more{mine ? 1.0 : 0.0};
      lockstep->allreduce_sum(more);  // whether any rank still has a part: all forward, or none
      if (more[0] == 0) break;
    } else if (!mine) {
      break;
    }
    if (mine) {
      const int64_t count = std::min(most, rows - first);
      images = count == rows ? batch.images : rows_of(batch.images, first, count);
      labels = count == rows ? batch.labels : rows_of(batch.labels, first, count);
      first += count;
    }
    if (!images.defined()) {  // nothing of its own at all: any batch of the right shape
      const Shape& out = model.graph().output_shape();  // [b, classes] or [b, T, classes]
      images = model.backend().zeros(model.graph().input_shape().with_batch(1));
      labels = model.backend().zeros(out.rank() == 3 ? Shape{1, out[1]} : Shape{1}, DType::i32);
    }
    model.forward(images, labels);
    if (!mine) continue;  // a lockstep forward for the other ranks: not counted
    const LossStats s = model.last_stats();
    sums.loss_sum += s.loss_sum, sums.correct += s.correct, sums.count += s.count;
  }
  model.set_training(training);
  return sums;
}

EvalResult Scheduler::evaluate_model(Loader& test, Comm* lockstep) {
  const LossStats mine = test_sums(ctx_.model, test, lockstep);
  std::vector<double> sums{mine.loss_sum, mine.correct, static_cast<double>(mine.count)};
  ctx_.comm.allreduce_sum(sums);
  return sums[2] > 0 ? EvalResult{sums[0] / sums[2], sums[1] / sums[2]} : EvalResult{};
}

void Scheduler::save(SchedulerState& state) {
  Model& model = ctx_.model;
  Backend& backend = model.backend();
  save_parameters(state);
  state.put("model.buffers", model.buffers(), backend);
  // By the names the optimizer gives them: SGD's momentum is "optimizer.momentum"; AdamW's
  // moments and step count "optimizer.m", "optimizer.v", "optimizer.step".
  for (const auto& [name, buffer] : ctx_.optimizer.state_buffers())
    state.put("optimizer." + name, buffer, backend);
  for (const auto& [name, value] : ctx_.optimizer.counters())
    state.set_counter("optimizer." + name, value);
  state.set_counter("model.step", static_cast<int64_t>(model.graph().step()));
}

void Scheduler::save_parameters(SchedulerState& state) {
  state.put("model.parameters", ctx_.model.parameters(), ctx_.model.backend());
}

void Scheduler::load_parameters(const SchedulerState& state) {
  state.get("model.parameters", ctx_.model.parameters(), ctx_.model.backend());
}

void Scheduler::load(const SchedulerState& state) {
  Model& model = ctx_.model;
  Backend& backend = model.backend();
  load_parameters(state);
  state.get("model.buffers", model.buffers(), backend);
  for (const auto& [name, buffer] : ctx_.optimizer.state_buffers())
    state.get("optimizer." + name, buffer, backend);
  for (const auto& [name, value] : ctx_.optimizer.counters())
    ctx_.optimizer.load_counter(name, state.counter("optimizer." + name));
  model.graph().set_step(static_cast<uint64_t>(state.counter("model.step")));
}

}  // namespace dtrain
