// D-Sync: every rank computes the gradient of its share of the global batch, the gradients are
// summed over ranks, and every rank applies the identical update (Pipe-SGD paper, Fig. 2a).
// With `segments` > 1 each segment's all-reduce starts as soon as backward has produced it, so
// communication overlaps the rest of backward (Eq. 6 with K = 1; DDP's gradient buckets).
// With `shard` each rank keeps part of the state of its 1/p only (ZeRO): the all-reduce becomes
// its two halves around the shard's step (shard/sharded_step.h), with the same result.
#pragma once
#include <future>
#include <memory>
#include <vector>

#include "comm/gradient_allreducer.h"  // GradientAllreducer
#include "config/kinds.h"              // WordOr: `segments: auto | N`
#include "sched/algorithm.h"           // AlgorithmEntry
#include "sched/gradient_segments.h"   // GradientSegments
#include "sched/scheduler.h"           // Scheduler
#include "sched/shard/sharded_step.h"  // ShardedStep: algorithm.shard

namespace dtrain {

struct SyncOptions {
  // auto: segments of about 25 MB; 1: the whole gradient after backward.
  config::WordOr<int> segments = config::WordOr<int>::named("auto");
  std::string shard = "none";  // shard_mode.h: none | optimizer | gradients | parameters
};

AlgorithmEntry sync_algorithm();
class SyncScheduler final : public Scheduler {
 public:
  SyncScheduler(SchedulerContext ctx, const SyncOptions& options);
  std::vector<std::pair<std::string, std::string>> resolved_settings() const override;
  std::string name() const override { return "sync"; }
  std::string describe() const override;
  EpochStats run_epoch(Loader& loader, const EpochPart& part) override;

 private:
  // The update of iteration i of `epoch` from the whole (all-reduced) gradient, clipped first
  // when optimizer.clip_grad_norm is on.
  void step(int epoch, int64_t i, EpochStats& stats);
  void flush() override;
  void save(SchedulerState& state) override;
  void load(const SchedulerState& state) override;
  void save_parameters(SchedulerState& state) override;
  void load_parameters(const SchedulerState& state) override;
  // Streams the model's weights without a copy; sharding the weights, every rank reads every
  // tensor (gathered as it is read).
  void write_weights(const WeightWriter& write) override;
  // Sharding the weights, every forward gathers them with the other ranks: a rank whose part of
  // the test set has ended runs its last batch again, uncounted, while another still evaluates.
  EvalResult evaluate(Loader& test) override;

  GradientSegments segments_;
  bool auto_segments_ = false;  // segments: auto (resolved_settings says how many it made)
  std::vector<std::future<void>> inflight_;
  size_t started_ = 0;
  ShardMode shard_ = ShardMode::none;
  std::unique_ptr<GradientAllreducer> allreducer_;  // null on one rank
  // algorithm.shard on more than one rank; destroyed before the all-reducer whose futures it
  // holds.
  std::unique_ptr<ShardedStep> sharded_;
};

}  // namespace dtrain
