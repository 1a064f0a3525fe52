#include "sched/local_sgd_scheduler.h"

#include <algorithm>  // max
#include <cmath>      // sqrt

#include "core/error.h"
#include "sched/local_sgd_timing.h"  // predict_local_sgd

namespace dtrain {

AlgorithmEntry local_sgd_algorithm() {
  using namespace config;
  auto keys = Schema<LocalSgdOptions>("local_sgd")
                  .key("sync_period", &LocalSgdOptions::sync_period, integer(Bounds::at_least(1)),
                       "local steps between two model averagings (1: every step)");
  return {.name = "local_sgd",
          .summary =
              "Local SGD: each rank steps its own model; every sync_period iterations the "
              "models (parameters and BatchNorm statistics) are averaged (HPSGD's baseline)",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<LocalSgdScheduler, LocalSgdOptions>(),
          .predict =
              [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
                return predict_local_sgd(in, codec, a.get<LocalSgdOptions>().sync_period);
              },
          .equivalence = Equivalence::local};
}

LocalSgdScheduler::LocalSgdScheduler(SchedulerContext ctx, const LocalSgdOptions& options)
    : Scheduler(std::move(ctx)), period_(options.sync_period) {
  DTRAIN_INPUT_CHECK(period_ >= 1) << "algorithm.sync_period: must be >= 1, got " << period_;
  if (ctx_.comm.size() == 1) return;  // one rank: plain SGD, nothing to average
  Model& model = ctx_.model;
  const Tensor trainable = trainable_part(model.parameters());
  anchor_ = model.backend().empty(trainable.shape());
  delta_ = model.backend().empty(trainable.shape());
  model.backend().copy(anchor_, trainable);
  deltas_ = std::make_unique<GradientAllreducer>(ctx_.comm, ctx_.compression, trainable.numel(),
                                                 gradient_placement());
  // BatchNorm statistics are few and not gradients: summed exactly.
  if (model.buffers().numel() > 0)
    statistics_ = std::make_unique<GradientAllreducer>(ctx_.comm, "none", model.buffers().numel(),
                                                       gradient_placement());
}

std::string LocalSgdScheduler::describe() const {
  if (!deltas_) return "local_sgd (one rank: plain SGD)";
  return "local_sgd over " + std::to_string(ctx_.comm.size()) + " ranks, models averaged every " +
         std::to_string(period_) + " iteration(s), " + deltas_->describe();
}

void LocalSgdScheduler::average(EpochStats* stats) {
  PhaseTimes unused;
  PhaseTimes& t = stats ? stats->phases : unused;
  Backend& backend = ctx_.model.backend();
  const Tensor weights = trainable_part(ctx_.model.parameters());
  const float inverse = 1.0f / static_cast<float>(ctx_.comm.size());
  {
    PhaseTimer timer(t, Phase::update);
    backend.copy(delta_, weights);
    backend.axpy(-1.0f, anchor_, delta_);  // this rank's change since the last average
  }
  {
    // One after the other: two NCCL communicators with collectives in flight at once may be
    // launched in different orders on different ranks and deadlock; the statistics are few.
    PhaseTimer timer(t, Phase::wait);
    deltas_->start(delta_).get();
    if (statistics_) statistics_->start(ctx_.model.buffers()).get();
  }
  PhaseTimer timer(t, Phase::update);
  // The same anchor plus the same sum on every rank: the ranks' models are now identical.
  backend.copy(weights, anchor_);
  backend.axpy(inverse, delta_, weights);
  if (statistics_) backend.scale(ctx_.model.buffers(), inverse);
}

EpochStats LocalSgdScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  EpochStats stats;
  PhaseTimes& t = stats.phases;
  const auto epoch_start = Clock::now();
  Batch batch;
  for (int64_t i = part.first; part.includes(i); ++i) {
    if (stop_requested()) break;  // every rank at the same iteration
    {
      PhaseTimer timer(t, Phase::data);
      if (!loader.next(batch)) break;
    }
    compute_gradients(batch, stats);
    {
      PhaseTimer timer(t, Phase::update);
      clip_gradients(trainable_gradients());  // this rank's own gradient: the local norm
      ctx_.optimizer.step(lr_at(epoch, i));
    }
    if (deltas_ && ++since_ >= period_) {
      average(&stats);
      ctx_.model.backend().copy(anchor_, trainable_part(ctx_.model.parameters()));
      since_ = 0;
    }
    finish_iteration(epoch, i, batch.rows(), stats);
  }
  stats.wall_s = seconds_since(epoch_start);
  if (deltas_) {
    deltas_->take_times(&t[Phase::comm], &t[Phase::compress]);
    if (statistics_) {
      double comm = 0, compress = 0;
      statistics_->take_times(&comm, &compress);
      t[Phase::comm] += comm;
    }
  }
  return stats;
}

void LocalSgdScheduler::discard_times() {
  double comm = 0, compress = 0;
  deltas_->take_times(&comm, &compress);
  if (statistics_) statistics_->take_times(&comm, &compress);
}

void LocalSgdScheduler::flush() {
  if (!deltas_ || since_ == 0) return;
  average(nullptr);
  discard_times();
  ctx_.model.backend().copy(anchor_, trainable_part(ctx_.model.parameters()));
  since_ = 0;
}

EvalResult LocalSgdScheduler::evaluate(Loader& test) {
  if (!deltas_ || since_ == 0) return evaluate_model(test);
  Model& model = ctx_.model;
  Backend& backend = model.backend();
  const Tensor weights = trainable_part(model.parameters());
  // This rank's own model, to continue training from after the evaluation.
  Tensor own_weights = backend.empty(weights.shape());
  Tensor own_statistics = backend.empty(model.buffers().shape());
  backend.copy(own_weights, weights);
  if (model.buffers().numel() > 0) backend.copy(own_statistics, model.buffers());
  average(nullptr);  // the anchor stays: training goes on from the own model
  discard_times();
  const EvalResult result = evaluate_model(test);
  backend.copy(weights, own_weights);
  if (model.buffers().numel() > 0) backend.copy(model.buffers(), own_statistics);
  return result;
}

void LocalSgdScheduler::save(SchedulerState& state) {
  Scheduler::save(state);
  state.set_counter("local_sgd.since_average", since_);
  if (anchor_.defined()) state.put("local_sgd.anchor", anchor_, ctx_.model.backend());
}

void LocalSgdScheduler::load(const SchedulerState& state) {
  Scheduler::load(state);
  since_ = state.counter("local_sgd.since_average");
  if (anchor_.defined()) state.get("local_sgd.anchor", anchor_, ctx_.model.backend());
}

}  // namespace dtrain
