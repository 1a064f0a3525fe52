// ShardedStep: the update of sharded data parallelism (algorithm.shard, ZeRO; docs/memory.md).
// Each gradient segment is reduce-scattered as soon as backward finishes it (the ring's first
// half, on the comm thread), so that each rank holds the global gradient of its shard only (the
// ring's block rank() of every segment: shard_layout.h); the rank clips with the global norm
// summed from the shards' and steps its shard with an optimizer whose state is that shard's alone;
// the updated weights are then all-gathered (the second half) segment by segment in forward
// order, each waited for just before the first layer that reads it: the gathers overlap the next
// forward. The sums, the norm and the update are those of an all-reduce over the same ring, so a
// sharded run equals the unsharded one bit for bit (docs/memory.md says where and why).
#pragma once
#include <cstdint>
#include <future>
#include <memory>  // unique_ptr
#include <string>
#include <utility>  // exchange
#include <vector>

#include "comm/comm.h"                     // Comm: the norm's partial sums
#include "comm/gradient_allreducer.h"      // GradientAllreducer: the ring's halves
#include "nn/model.h"                      // Model: its buffers and forward hooks
#include "nn/safetensors.h"                // TensorSource: model.safetensors, gathered
#include "optim/optimizer.h"               // Optimizer: sharded by this
#include "sched/gradient_segments.h"       // GradientSegments: the segments and their bounds
#include "sched/scheduler_state.h"         // SchedulerState: the shard's layout in checkpoints
#include "sched/shard/parameter_gather.h"  // ParameterGather: the weights' shard
#include "sched/shard/shard_layout.h"      // ShardLayout
#include "sched/shard/shard_mode.h"        // ShardMode

namespace dtrain {

// The squared L2 norm of flat[bounds.front(), bounds.back()) summed as sharded ranks sum it: per
// rank r of `ranks`, its pieces (ShardLayout) in buffer order, then the ranks' sums in rank order.
// An unsharded sync run clips with this norm too, so that its clip equals a sharded run's.
double blockwise_squared_norm(Backend& backend, const Tensor& flat,
                              const std::vector<int64_t>& bounds, int ranks);
// Clips flat[bounds.front(), bounds.back()) — a gradient whole and equal on every rank, summed
// over `ranks` — to `clip_max` by that norm: an unsharded multi-rank run clips as a sharded one.
void clip_blockwise(Backend& backend, const Tensor& flat, const std::vector<int64_t>& bounds,
                    int ranks, double clip_max);

class ShardedStep {
 public:
  // Shards `optimizer` (before its first step) for this rank of `comm`, over `segments` of the
  // model's trainable range, and hooks the model's forward so that each layer waits for its
  // weights' all-gather. `allreducer`: the scheduler's, whose comm thread runs both halves.
  ShardedStep(ShardMode mode, Model& model, Optimizer& optimizer, Comm& comm,
              GradientAllreducer& allreducer, const GradientSegments& segments);
  ~ShardedStep();
  ShardedStep(const ShardedStep&) = delete;
  ShardedStep& operator=(const ShardedStep&) = delete;

  // Backward's on_ready: starts the reduce-scatter of every segment of `gradients` (a flat
  // buffer of the model's layout: the model's, or a pipelined scheduler's slot) that is final
  // once gradients[offset, P) are and is not started yet; their futures go to `inflight`, which
  // the caller waits for (exposed communication: it times the wait). `started` counts them
  // within the iteration (0 before backward), as GradientSegments::start_ready does.
  void start_ready(int64_t offset, const Tensor& gradients, size_t& started,
                   std::vector<std::future<void>>& inflight);
  // The update of this rank's shard from `gradients` (reduce-scattered): clipped to `clip_max`
  // by the global norm (0: off), then the optimizer's step of the shard at `lr`; then the
  // all-gathers of the weights start (sharding the weights: the first one; ParameterGather).
  void step(float lr, double clip_max, const Tensor& gradients);
  // Waits for every weight all-gather in flight: the model's weights are whole again (before
  // evaluating, saving, or reading the weights).
  void flush();
  // Seconds the forward (or the backward) pass spent waiting for all-gathers since the last
  // call: exposed communication.
  double take_gather_wait(bool backward);
  bool shards_weights() const { return gather_ != nullptr; }

  // Sharding the weights (parameters): a checkpoint holds the frozen weights and this rank's
  // pieces ("model.parameters.shard") in place of the whole buffer; and model.safetensors is
  // read tensor by tensor, each gathered as it is read (every rank reads every tensor, in order).
  void save_parameters(SchedulerState& state) const;
  void load_parameters(const SchedulerState& state);
  std::vector<TensorSource> weight_sources();

  // What a checkpoint needs besides the optimizer's (compact) state: the shard's layout, so
  // that a checkpoint is read only by the same layout (the next step: resharding).
  void save(SchedulerState& state) const;
  void check_layout(const SchedulerState& state) const;

  const ShardLayout& layout() const { return layout_; }
  std::string describe() const;

 private:
  // Waits for the weights' all-gathers of the segments that overlap [.., end).
  void wait_gathered(int64_t end);

  ShardMode mode_;
  Model& model_;
  Optimizer& optimizer_;
  Comm& comm_;
  GradientAllreducer& allreducer_;
  const GradientSegments& segments_;
  ShardLayout layout_;
  std::vector<std::future<void>> gathering_;  // by segment; valid while in flight
  std::vector<std::string> hooked_;           // the layers whose forward waits
  double gather_wait_s_ = 0;
  std::unique_ptr<ParameterGather> gather_;  // sharding the weights
};

}  // namespace dtrain
