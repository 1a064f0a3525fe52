// Local SGD: every rank steps its own copy of the model with its own batches (local mean
// gradient, local momentum), and every `sync_period` iterations the ranks average their
// parameters and BatchNorm statistics with one all-reduce (HPSGD's baseline; Stich 2019,
// Lin et al. 2020). What travels is each rank's change since the last average, so a codec
// compresses small deltas rather than the weights; without one it is the plain model average.
#pragma once
#include <memory>

#include "comm/gradient_allreducer.h"  // GradientAllreducer
#include "sched/algorithm.h"           // AlgorithmEntry
#include "sched/scheduler.h"           // Scheduler

namespace dtrain {

struct LocalSgdOptions {
  int sync_period = 8;  // local steps between two averagings (1: every step)
};

AlgorithmEntry local_sgd_algorithm();
class LocalSgdScheduler final : public Scheduler {
 public:
  LocalSgdScheduler(SchedulerContext ctx, const LocalSgdOptions& options);
  std::string name() const override { return "local_sgd"; }
  std::string describe() const override;
  EpochStats run_epoch(Loader& loader, const EpochPart& part) override;
  // Averages now if local steps were taken since the last averaging (the end of training).
  void flush() override;
  // The average of the ranks' models; each rank's own model is restored afterwards, so
  // evaluating does not change the training.
  EvalResult evaluate(Loader& test) override;
  // The base state plus the anchor (the last average) and the local steps since it.
  void save(SchedulerState& state) override;
  void load(const SchedulerState& state) override;

 protected:
  float gradient_scale(int64_t rows) const override { return 1.0f / static_cast<float>(rows); }

 private:
  // The model's trainable parameters and BatchNorm statistics ← their mean over the ranks.
  // `stats` (may be null) gets the wait and update time.
  void average(EpochStats* stats);
  // Forgets the communication time of an averaging outside an epoch (evaluation, the end), so
  // that timing.csv's comm_s stays within the epochs' wall time.
  void discard_times();

  int period_;
  int64_t since_ = 0;  // local steps since the last averaging
  Tensor anchor_;      // trainable parameters at the last averaging (equal on every rank)
  Tensor delta_;       // this rank's change since then, summed over the ranks in place
  std::unique_ptr<GradientAllreducer> deltas_, statistics_;  // null on one rank / without BN
};

}  // namespace dtrain
