#include "sched/pipe_sgd_scheduler.h"

#include <algorithm>  // sort, min

#include "core/error.h"
#include "core/timer.h"  // ScopedTimer

namespace dtrain {

PipeSgdScheduler::PipeSgdScheduler(SchedulerContext ctx)
    : Scheduler(std::move(ctx)), K_(ctx_.pipeline.K), warmup_epochs_(ctx_.pipeline.warmup_epochs) {
  DTRAIN_INPUT_CHECK(K_ >= 1) << "algorithm.K: must be >= 1, got " << K_;
  DTRAIN_INPUT_CHECK(ctx_.pipeline.segments >= 1)
      << "algorithm.segments: must be >= 1, got " << ctx_.pipeline.segments;
  Model& model = ctx_.model;
  const int64_t begin = model.trainable_offset(), n = model.num_parameters() - begin;
  const int64_t segments = std::max<int64_t>(1, std::min<int64_t>(ctx_.pipeline.segments, n));
  for (int64_t j = 0; j <= segments; ++j) segment_begin_.push_back(begin + n * j / segments);

  // Slot 0 is the model's own buffer; the others are new. Frozen ranges stay zero.
  slots_.resize(static_cast<size_t>(K_));
  for (int k = 0; k < K_; ++k) {
    slots_[k].gradients =
        k == 0 ? model.gradients() : model.backend().zeros({model.num_parameters()});
    slots_[k].inflight.reserve(static_cast<size_t>(segments));
  }
  if (ctx_.comm.size() > 1)
    allreducer_ =
        std::make_unique<GradientAllreducer>(ctx_.comm, ctx_.compression, n, gradient_placement());
}

PipeSgdScheduler::~PipeSgdScheduler() {
  // The communication thread may still be writing into a slot: let it finish first.
  for (Slot& slot : slots_)
    for (auto& f : slot.inflight)
      if (f.valid()) f.wait();
}

std::string PipeSgdScheduler::describe() const {
  std::string s = "pipe_sgd (K = " + std::to_string(K_);
  if (K_ == 1) s += ": D-Sync";
  if (warmup_epochs_ > 0 && K_ > 1)
    s += ", D-Sync for the first " + std::to_string(warmup_epochs_) + " epoch(s)";
  const size_t segments = segment_begin_.size() - 1;
  s += segments == 1 ? ", sequential gradient communication"
                     : ", " + std::to_string(segments) + " gradient segments";
  s += ")";
  if (!allreducer_) return s + " on one rank";
  return s + " over " + std::to_string(ctx_.comm.size()) + " ranks, " + allreducer_->describe();
}

void PipeSgdScheduler::start_segments_ready_from(Slot& slot, int64_t offset) {
  const size_t segments = segment_begin_.size() - 1;
  // Backward finishes the buffer from its end: segments start last to first.
  while (segments_started_ < segments) {
    const size_t j = segments - 1 - segments_started_;
    if (segment_begin_[j] < offset) break;
    const int64_t begin = segment_begin_[j];
    slot.inflight.push_back(
        allreducer_->start(slot.gradients.slice(begin, {segment_begin_[j + 1] - begin})));
    ++segments_started_;
  }
}

void PipeSgdScheduler::compute_into(Slot& slot, const Batch& batch, EpochStats& stats) {
  ctx_.model.set_gradients(slot.gradients);
  segments_started_ = 0;
  if (!allreducer_) {
    compute_gradients(batch, stats);
    return;
  }
  // One segment: the whole buffer goes after backward, as in the sync scheduler (Eq. 5);
  // several: each as soon as it is final (Eq. 6).
  if (segment_begin_.size() == 2) {
    compute_gradients(batch, stats);
  } else {
    compute_gradients(batch, stats,
                      [&](int64_t offset) { start_segments_ready_from(slot, offset); });
  }
  start_segments_ready_from(slot, segment_begin_.front());
}

void PipeSgdScheduler::apply(Slot& slot, float lr, EpochStats* stats) {
  double unused = 0;
  if (!slot.inflight.empty()) {
    ScopedTimer t(stats ? &stats->wait_s : &unused);
    for (auto& f : slot.inflight) f.get();
    slot.inflight.clear();
  }
  ScopedTimer t(stats ? &stats->update_s : &unused);
  ctx_.optimizer.step(lr, ctx_.model.parameters(), slot.gradients);
  slot.iteration = -1;
}

EpochStats PipeSgdScheduler::run_epoch(Loader& loader, int epoch, int64_t max_iterations) {
  EpochStats stats;
  const auto epoch_start = Clock::now();
  const bool pipelined = K_ > 1 && epoch >= warmup_epochs_;
  Batch batch;
  for (int64_t i = 0; max_iterations <= 0 || i < max_iterations; ++i) {
    {
      ScopedTimer t(&stats.data_s);
      if (!loader.next(batch)) break;
    }
    const float lr = lr_at(epoch, i);
    last_lr_ = lr;
    Slot& slot = slots_[static_cast<size_t>(iteration_ % K_)];
    // Algorithm 1, lines 3–5: wait for the aggregated gradient of t − K and update with it.
    if (slot.iteration >= 0) apply(slot, lr, &stats);
    // Lines 6–10: this iteration's gradient; the communication thread takes it from here.
    compute_into(slot, batch, stats);
    slot.iteration = iteration_++;
    if (!pipelined) apply(slot, lr, &stats);  // D-Sync: wait for it now
    finish_iteration(epoch, i, batch.labels.numel(), stats);
  }
  stats.wall_s = seconds_since(epoch_start);
  if (allreducer_) allreducer_->take_times(&stats.comm_s, &stats.compress_s);
  return stats;
}

void PipeSgdScheduler::flush() {
  std::vector<Slot*> pending;
  for (Slot& slot : slots_)
    if (slot.iteration >= 0) pending.push_back(&slot);
  std::sort(pending.begin(), pending.end(),
            [](const Slot* a, const Slot* b) { return a->iteration < b->iteration; });
  for (Slot* slot : pending) apply(*slot, last_lr_, nullptr);
}

}  // namespace dtrain
