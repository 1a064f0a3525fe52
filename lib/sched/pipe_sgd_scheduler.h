// Pipe-SGD (Li et al., NeurIPS 2018, Algorithm 1): the computation thread updates the weights
// with the aggregated gradient of iteration t − K, then computes the gradient of iteration t,
// while the communication thread all-reduces the gradients of the iterations in between. An
// iteration then costs max(compute, communication) instead of their sum (Eq. 4), and the codec
// runs on the communication thread, off the critical path.
//
// Every gradient is applied exactly once, in iteration order: K − 1 iterations after it was
// computed when pipelining, at once in D-Sync (K = 1 and the warm-up epochs), and what is still
// in flight at flush() (evaluation, the end). So the first K − 1 updates of a pipelined phase
// use zero gradients, as in the paper, and switching from warm-up to pipelining neither stalls
// nor loses a gradient.
#pragma once
#include <future>
#include <memory>
#include <vector>

#include "comm/gradient_allreducer.h"  // GradientAllreducer
#include "sched/algorithm.h"           // AlgorithmEntry
#include "sched/gradient_segments.h"   // GradientSegments
#include "sched/scheduler.h"           // Scheduler
#include "sched/shard/sharded_step.h"  // ShardedStep: algorithm.shard

namespace dtrain {

// Pipe-SGD's keys (algorithm.K, .warmup_epochs, .segments).
struct PipeSgdOptions {
  int K = 2;                   // iteration dependency: the update at t uses the gradient of t − K
  int warmup_epochs = 0;       // epochs of D-Sync before pipelining starts
  int segments = 1;            // gradient segments all-reduced as backward produces them
  std::string shard = "none";  // none | optimizer | gradients: ZeRO-1/2 (sched/shard)
};

AlgorithmEntry pipe_sgd_algorithm();
class PipeSgdScheduler final : public Scheduler {
 public:
  PipeSgdScheduler(SchedulerContext ctx, const PipeSgdOptions& options);
  ~PipeSgdScheduler() override;
  std::string name() const override { return "pipe_sgd"; }
  std::string describe() const override;
  EpochStats run_epoch(Loader& loader, const EpochPart& part) override;
  void flush() override;
  // The K slots' gradients (all-reduced: the wait is for what is in flight) and whose they are,
  // the iteration counter and the last learning rate.
  void save(SchedulerState& state) override;
  void load(const SchedulerState& state) override;
  // Sharded (algorithm.shard), the stale all-reduce is split the same way: each slot's gradient
  // is reduce-scattered while the next iterations compute, the rank steps its shard with it, and
  // the updated weights are all-gathered, each segment waited for by the next forward's first
  // layer that reads it.
  void write_weights(const WeightWriter& write) override;

 private:
  // One iteration's gradient buffer: computed into by backward, then summed over the ranks in
  // place by the communication thread, then applied.
  struct Slot {
    Tensor gradients;
    std::vector<std::future<void>> inflight;  // one per segment
    int64_t iteration = -1;                   // whose gradient it holds; -1: none to apply
  };

  // Forward and backward of iteration t into `slot`, starting the all-reduce of each segment as
  // soon as backward has produced it.
  void compute_into(Slot& slot, const Batch& batch, EpochStats& stats);
  // Waits for the slot's all-reduce (into `stats`' wait phase when given).
  void complete(Slot& slot, EpochStats* stats);
  // Waits for the slot's all-reduce and applies its gradient with learning rate `lr`.
  void apply(Slot& slot, float lr, EpochStats* stats);

  int K_, warmup_epochs_;
  GradientSegments segments_;    // of the trainable range
  std::vector<Slot> slots_;      // K of them; slot t mod K holds iteration t
  size_t segments_started_ = 0;  // of the iteration being computed
  int64_t iteration_ = 0;        // over the whole run
  float last_lr_ = 0;
  ShardMode shard_ = ShardMode::none;
  // Declared last: its thread is joined, finishing any all-reduce still writing into a slot,
  // before the slots are freed.
  std::unique_ptr<GradientAllreducer> allreducer_;  // null on one rank
  // algorithm.shard on more than one rank; destroyed before the all-reducer whose futures it
  // holds.
  std::unique_ptr<ShardedStep> sharded_;
};

}  // namespace dtrain
