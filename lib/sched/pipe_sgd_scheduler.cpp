#include "sched/pipe_sgd_scheduler.h"

#include <fmt/format.h>  // the plan note

#include <algorithm>  // sort
#include <bit>        // bit_cast: the learning rate as a counter, exactly

#include "core/error.h"
#include "sched/pipe_sgd_timing.h"  // predict_pipe_sgd, recommend_pipe_sgd

namespace dtrain {

AlgorithmEntry pipe_sgd_algorithm() {
  using namespace config;
  auto keys =
      Schema<PipeSgdOptions>("pipe_sgd")
          .key("K", &PipeSgdOptions::K, integer(Bounds::at_least(1)),
               "iteration dependency: the update at t uses the gradient of t − K (1 = D-Sync)")
          .key("warmup_epochs", &PipeSgdOptions::warmup_epochs, integer(Bounds::at_least(0)),
               "epochs of D-Sync before pipelining starts")
          .key("segments", &PipeSgdOptions::segments, integer(Bounds::at_least(1)),
               "gradient segments, each all-reduced as soon as backward has produced it")
          .key("shard", &PipeSgdOptions::shard, choice(shard_words_to(ShardMode::gradients)),
               "state each rank keeps of its 1/p only (ZeRO-1/2): none | optimizer (its "
               "optimizer state) | gradients (and its slots' gradients once reduce-scattered)");
  return {
      .name = "pipe_sgd",
      .summary =
          "Pipe-SGD (Li et al., NeurIPS 2018): the update at t uses the all-reduced "
          "gradient of t − K, so communication and its codec overlap the next iterations",
      .keys = erase(std::move(keys)),
      .make = scheduler_factory<PipeSgdScheduler, PipeSgdOptions>(),
      .predict =
          [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
            const auto& o = a.get<PipeSgdOptions>();
            return predict_pipe_sgd(in, codec, o.K, o.segments);
          },
      .recommend =
          [](const TimingInputs& in, const std::vector<Prediction>& rows,
             const AlgorithmConfig& a) {
            return "recommendation (Pipe-SGD: K = 2, compute-bound after compression, "
                   "sequential communication):\n  " +
                   recommend_pipe_sgd(in, rows, a.get<PipeSgdOptions>().segments).text + "\n";
          },
      .plan_note =
          [](const AlgorithmConfig& a) {
            const auto& o = a.get<PipeSgdOptions>();
            if (o.K <= 1 || o.warmup_epochs <= 0) return std::string();
            return fmt::format(
                "(algorithm.warmup_epochs={}: those epochs of pipe_sgd run as D-Sync, the "
                "sync rows)\n",
                o.warmup_epochs);
          },
      .equivalence = Equivalence::stale,
      .shard =
          [](const AlgorithmConfig& a) { return shard_mode_named(a.get<PipeSgdOptions>().shard); },
      .deepest_shard = ShardMode::gradients,
      .segment_bounds =
          [](const AlgorithmConfig& a, int64_t begin, int64_t end) {
            return segment_bounds(begin, end, a.get<PipeSgdOptions>().segments);
          }};
}

PipeSgdScheduler::PipeSgdScheduler(SchedulerContext ctx, const PipeSgdOptions& options)
    : Scheduler(std::move(ctx)),
      K_(options.K),
      warmup_epochs_(options.warmup_epochs),
      segments_(ctx_.model.trainable_offset(), ctx_.model.num_parameters(), options.segments),
      shard_(shard_mode_named(options.shard)) {
  DTRAIN_INPUT_CHECK(K_ >= 1) << "algorithm.K: must be >= 1, got " << K_;
  Model& model = ctx_.model;
  const int64_t n = model.num_parameters() - segments_.begin();

  // Slot 0 is the model's own buffer; the others are new. Frozen ranges stay zero.
  slots_.resize(static_cast<size_t>(K_));
  for (int k = 0; k < K_; ++k) {
    // Reserved, as the model's: sharding gradients gives back what the rank does not own.
    slots_[k].gradients =
        k == 0 ? model.gradients() : model.backend().reserve({model.num_parameters()});
    slots_[k].inflight.reserve(segments_.size());
  }
  if (ctx_.comm.size() == 1) return;
  allreducer_ =
      std::make_unique<GradientAllreducer>(ctx_.comm, ctx_.compression, n, gradient_placement());
  if (shard_ != ShardMode::none)
    sharded_ = std::make_unique<ShardedStep>(shard_, model, ctx_.optimizer, ctx_.comm, *allreducer_,
                                             segments_);
}

PipeSgdScheduler::~PipeSgdScheduler() {
  // The communication thread may still be writing into a slot: let it finish first.
  for (Slot& slot : slots_)
    for (auto& f : slot.inflight)
      if (f.valid()) f.wait();
  sharded_.reset();  // its weight gathers, before the all-reducer
}

std::string PipeSgdScheduler::describe() const {
  std::string s = "pipe_sgd (K = " + std::to_string(K_);
  if (K_ == 1) s += ": D-Sync";
  if (warmup_epochs_ > 0 && K_ > 1)
    s += ", D-Sync for the first " + std::to_string(warmup_epochs_) + " epoch(s)";
  const size_t segments = segments_.size();
  s += segments == 1 ? ", sequential gradient communication"
                     : ", " + std::to_string(segments) + " gradient segments";
  s += ")";
  if (!allreducer_) return s + " on one rank";
  return s + " over " + std::to_string(ctx_.comm.size()) + " ranks, " +
         (sharded_ ? sharded_->describe() : allreducer_->describe());
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
  auto start = [&](int64_t offset) {
    if (sharded_)
      sharded_->start_ready(offset, slot.gradients, segments_started_, slot.inflight);
    else
      segments_.start_ready(*allreducer_, slot.gradients, offset, segments_started_, slot.inflight);
  };
  if (segments_.size() == 1)
    compute_gradients(batch, stats);
  else
    compute_gradients(batch, stats, start);
  start(segments_.begin());
  if (sharded_) {
    // The forward's waits for the weights' all-gathers are exposed communication, not compute.
    const double waited = sharded_->take_gather_wait(false);
    stats.phases[Phase::forward] -= waited;
    stats.phases[Phase::wait] += waited;
  }
}

void PipeSgdScheduler::complete(Slot& slot, EpochStats* stats) {
  if (slot.inflight.empty()) return;
  PhaseTimes unused;
  PhaseTimer t(stats ? stats->phases : unused, Phase::wait);
  for (auto& f : slot.inflight) f.get();
  slot.inflight.clear();
}

void PipeSgdScheduler::apply(Slot& slot, float lr, EpochStats* stats) {
  complete(slot, stats);
  PhaseTimes unused;
  PhaseTimer t(stats ? stats->phases : unused, Phase::update);
  slot.iteration = -1;
  if (sharded_) return sharded_->step(lr, ctx_.clip_grad_norm, slot.gradients);
  // The all-reduced gradient of K iterations ago, identical on every rank: so is its clip. Over
  // ranks its norm is summed as a sharded run sums it, so that both clip alike.
  if (allreducer_ && ctx_.clip_grad_norm > 0) {
    clip_blockwise(ctx_.model.backend(), slot.gradients, segments_.bounds(), ctx_.comm.size(),
                   ctx_.clip_grad_norm);
  } else {
    clip_gradients(trainable_part(slot.gradients));
  }
  ctx_.optimizer.step(lr, ctx_.model.parameters(), slot.gradients);
}

EpochStats PipeSgdScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  EpochStats stats;
  const auto epoch_start = Clock::now();
  const bool pipelined = K_ > 1 && epoch >= warmup_epochs_;
  Batch batch;
  for (int64_t i = part.first; part.includes(i); ++i) {
    if (stop_requested()) break;  // every rank at the same iteration
    {
      PhaseTimer t(stats.phases, Phase::data);
      if (!loader.next(batch)) break;
    }
    const float lr = lr_at(epoch, i);
    last_lr_ = lr;
    Slot& slot = slots_[static_cast<size_t>(iteration_ % K_)];
    // Algorithm 1, lines 3–5: wait for the aggregated gradient of t − K and update with it.
    if (slot.iteration >= 0) apply(slot, lr, &stats);
    // Lines 6–10: this iteration's gradient; the communication thread takes it from here.
    compute_into(slot, batch, stats);
    if (pipelined) check_gradients(slot.gradients, iteration_ + 1);
    slot.iteration = iteration_++;
    if (!pipelined) apply(slot, lr, &stats);  // D-Sync: wait for it now
    finish_iteration(epoch, i, batch.rows(), stats);
  }
  stats.wall_s = seconds_since(epoch_start);
  if (allreducer_)
    allreducer_->take_times(&stats.phases[Phase::comm], &stats.phases[Phase::compress]);
  return stats;
}

void PipeSgdScheduler::flush() {
  std::vector<Slot*> pending;
  for (Slot& slot : slots_)
    if (slot.iteration >= 0) pending.push_back(&slot);
  std::sort(pending.begin(), pending.end(),
            [](const Slot* a, const Slot* b) { return a->iteration < b->iteration; });
  for (Slot* slot : pending) apply(*slot, last_lr_, nullptr);
  if (sharded_) sharded_->flush();  // the weights whole again
}

void PipeSgdScheduler::write_weights(const WeightWriter& write) {
  flush();
  if (ctx_.comm.rank() == 0) write(model_weight_sources());
}

void PipeSgdScheduler::save(SchedulerState& state) {
  if (sharded_) sharded_->flush();  // the weights whole; the gradients in flight stay so
  Scheduler::save(state);
  if (sharded_) sharded_->save(state);
  Backend& backend = ctx_.model.backend();
  for (size_t k = 0; k < slots_.size(); ++k) {
    Slot& slot = slots_[k];
    complete(slot, nullptr);  // a sum in flight is saved as the sum it will be
    const std::string name = "pipe_sgd.slot" + std::to_string(k);
    state.put(name + ".gradients", slot.gradients, backend);
    state.set_counter(name + ".iteration", slot.iteration);
  }
  state.set_counter("pipe_sgd.iteration", iteration_);
  state.set_counter("pipe_sgd.last_lr_bits", std::bit_cast<int32_t>(last_lr_));
}

void PipeSgdScheduler::load(const SchedulerState& state) {
  if (sharded_) sharded_->check_layout(state);
  Scheduler::load(state);
  Backend& backend = ctx_.model.backend();
  for (size_t k = 0; k < slots_.size(); ++k) {
    Slot& slot = slots_[k];
    complete(slot, nullptr);
    const std::string name = "pipe_sgd.slot" + std::to_string(k);
    state.get(name + ".gradients", slot.gradients, backend);
    slot.iteration = state.counter(name + ".iteration");
  }
  iteration_ = state.counter("pipe_sgd.iteration");
  last_lr_ = std::bit_cast<float>(static_cast<int32_t>(state.counter("pipe_sgd.last_lr_bits")));
}

}  // namespace dtrain
