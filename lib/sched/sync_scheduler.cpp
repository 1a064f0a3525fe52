#include "sched/sync_scheduler.h"

#include <algorithm>  // max

#include "core/error.h"
#include "sched/shard/shard_mode.h"  // shard_words
#include "sched/sync_timing.h"       // predict_sync

namespace dtrain {

namespace {

int64_t resolve_segments(const SyncOptions& o, int64_t floats) {
  return o.segments.is("auto") ? segments_for_bytes(floats, kAutoSegmentBytes) : o.segments.value;
}

}  // namespace

AlgorithmEntry sync_algorithm() {
  using namespace config;
  auto keys =
      Schema<SyncOptions>("sync")
          .key("segments", &SyncOptions::segments, word_or({"auto"}, integer(Bounds::at_least(1))),
               "gradient segments all-reduced while backward runs (auto: ~25 MB each; 1: after "
               "backward)")
          .key("shard", &SyncOptions::shard, choice(shard_words()),
               "state each rank keeps of its 1/p only (ZeRO-1/2/3): none | optimizer "
               "(its optimizer state) | gradients (and gradients) | parameters (and "
               "weights, gathered layer by layer)");
  return {.name = "sync",
          .summary =
              "D-Sync: ring/MPI all-reduce of the gradients every iteration, overlapped with "
              "backward in segments (Pipe-SGD paper's baseline)",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<SyncScheduler, SyncOptions>(),
          .predict =
              [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
                return predict_sync(in, codec,
                                    static_cast<int>(resolve_segments(a.get<SyncOptions>(), in.n)));
              },
          .equivalence = Equivalence::exact,
          .shard =
              [](const AlgorithmConfig& a) { return shard_mode_named(a.get<SyncOptions>().shard); },
          .segment_bounds =
              [](const AlgorithmConfig& a, int64_t begin, int64_t end) {
                return segment_bounds(begin, end,
                                      resolve_segments(a.get<SyncOptions>(), end - begin));
              }};
}

SyncScheduler::SyncScheduler(SchedulerContext ctx, const SyncOptions& options)
    : Scheduler(std::move(ctx)),
      segments_(
          ctx_.model.trainable_offset(), ctx_.model.num_parameters(),
          resolve_segments(options, ctx_.model.num_parameters() - ctx_.model.trainable_offset())),
      shard_(shard_mode_named(options.shard)) {
  auto_segments_ = options.segments.is("auto");
  inflight_.reserve(segments_.size());
  if (ctx_.comm.size() == 1) return;  // one rank: nothing to shard
  int64_t largest = 0;                // the ring's scratch is for a block of the largest segment
  for (size_t j = 0; j < segments_.size(); ++j)
    largest = std::max(largest, segments_.bounds()[j + 1] - segments_.bounds()[j]);
  allreducer_ = std::make_unique<GradientAllreducer>(ctx_.comm, ctx_.compression, largest,
                                                     gradient_placement());
  if (shard_ != ShardMode::none)
    sharded_ = std::make_unique<ShardedStep>(shard_, ctx_.model, ctx_.optimizer, ctx_.comm,
                                             *allreducer_, segments_);
}

std::vector<std::pair<std::string, std::string>> SyncScheduler::resolved_settings() const {
  if (!auto_segments_) return {};
  return {{"algorithm.segments", std::to_string(segments_.size())}};
}

std::string SyncScheduler::describe() const {
  if (!allreducer_) return "sync (one rank)";
  std::string s = "sync (D-Sync) over " + std::to_string(ctx_.comm.size()) + " ranks, ";
  s += segments_.size() == 1
           ? "whole gradient after backward"
           : std::to_string(segments_.size()) + " gradient segments all-reduced during backward";
  return s + ", " + (sharded_ ? sharded_->describe() : allreducer_->describe());
}

void SyncScheduler::flush() {
  if (sharded_) sharded_->flush();
}

void SyncScheduler::save(SchedulerState& state) {
  flush();
  Scheduler::save(state);
  if (sharded_) sharded_->save(state);
}

void SyncScheduler::load(const SchedulerState& state) {
  if (sharded_) sharded_->check_layout(state);
  Scheduler::load(state);
}

void SyncScheduler::save_parameters(SchedulerState& state) {
  if (sharded_ && sharded_->shards_weights()) return sharded_->save_parameters(state);
  Scheduler::save_parameters(state);
}

void SyncScheduler::load_parameters(const SchedulerState& state) {
  if (sharded_ && sharded_->shards_weights()) return sharded_->load_parameters(state);
  Scheduler::load_parameters(state);
}

void SyncScheduler::write_weights(const WeightWriter& write) {
  flush();
  if (sharded_ && sharded_->shards_weights()) return write(sharded_->weight_sources());
  if (ctx_.comm.rank() == 0) write(model_weight_sources());
}

EvalResult SyncScheduler::evaluate(Loader& test) {
  flush();
  const bool lockstep = sharded_ && sharded_->shards_weights();
  return evaluate_model(test, lockstep ? &ctx_.comm : nullptr);
}

void SyncScheduler::step(int epoch, int64_t i, EpochStats& stats) {
  PhaseTimer timer(stats.phases, Phase::update);
  if (sharded_) return sharded_->step(lr_at(epoch, i), ctx_.clip_grad_norm, ctx_.model.gradients());
  // The all-reduced gradient is the same on every rank, so are its norm and its clip. Over
  // ranks the norm is summed as a sharded run sums it, so that both clip alike.
  if (allreducer_ && ctx_.clip_grad_norm > 0) {
    clip_blockwise(ctx_.model.backend(), ctx_.model.gradients(), segments_.bounds(),
                   ctx_.comm.size(), ctx_.clip_grad_norm);
  } else {
    clip_gradients(trainable_gradients());
  }
  ctx_.optimizer.step(lr_at(epoch, i));
}

EpochStats SyncScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  EpochStats stats;
  PhaseTimes& t = stats.phases;
  const auto epoch_start = Clock::now();
  const Tensor& grads = ctx_.model.gradients();
  const bool clipping = ctx_.clip_grad_norm > 0;
  Batch batch;
  for (int64_t i = part.first; part.includes(i); ++i) {
    if (stop_requested()) break;  // every rank at the same iteration
    {
      PhaseTimer timer(t, Phase::data);
      if (!loader.next(batch)) break;
    }
    if (!allreducer_ && !clipping) {
      // One rank: a layer's parameters are stepped as soon as backward has made their
      // gradients final, while parameters and gradients are still in cache (the same update
      // element for element, only earlier; PyTorch's optimizer-in-backward hooks do the same).
      // The update phase then counts as backward. (Clipping needs the whole gradient's norm
      // before any layer steps: it takes the path below.)
      const float lr = lr_at(epoch, i);
      int64_t end = ctx_.model.num_parameters();
      ctx_.optimizer.begin_step();  // the ranges below are one step (AdamW's t)
      compute_gradients(batch, stats, [&](int64_t offset) {
        ctx_.optimizer.step_range(lr, offset, end - offset);
        end = offset;
      });
      finish_iteration(epoch, i, batch.rows(), stats);
      continue;
    }
    if (!allreducer_) {
      compute_gradients(batch, stats);
      step(epoch, i, stats);
      finish_iteration(epoch, i, batch.rows(), stats);
      continue;
    }
    started_ = 0;
    auto start = [&](int64_t offset) {
      if (sharded_)
        sharded_->start_ready(offset, grads, started_, inflight_);
      else
        segments_.start_ready(*allreducer_, grads, offset, started_, inflight_);
    };
    if (segments_.size() > 1)
      compute_gradients(batch, stats, start);
    else
      compute_gradients(batch, stats);
    if (sharded_) {
      // The forward's waits for the weights' all-gathers are exposed communication, not compute.
      const double forward = sharded_->take_gather_wait(false);
      const double backward = sharded_->take_gather_wait(true);
      t[Phase::forward] -= forward;
      t[Phase::backward] -= backward;
      t[Phase::wait] += forward + backward;
    }
    start(segments_.begin());  // whatever backward has not started (all of it with one)
    {
      // What is still running after backward is exposed: the compute thread waits for it.
      PhaseTimer timer(t, Phase::wait);
      for (auto& f : inflight_) f.get();
      inflight_.clear();
    }
    step(epoch, i, stats);
    finish_iteration(epoch, i, batch.rows(), stats);
  }
  stats.wall_s = seconds_since(epoch_start);
  if (allreducer_) allreducer_->take_times(&t[Phase::comm], &t[Phase::compress]);
  return stats;
}

}  // namespace dtrain
