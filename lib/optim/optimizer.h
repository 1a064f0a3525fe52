// The optimizer as the schedulers see it: an update of the flat parameter buffer from the flat
// gradient buffer, over the whole trainable range or a contiguous range of it, with the model's
// own buffers or others of the same layout (a stashed copy, an aggregated gradient); its state by
// name, for checkpoints; and the capabilities only some algorithms ask for. Each optimizer is a
// row of the optimizer table (optimizer_table.h); RuleOptimizer (rule_optimizer.h) implements
// all of this for any element-wise update rule.
#pragma once
#include <cstdint>
#include <memory>    // unique_ptr: fresh()
#include <optional>  // linear_step_decay
#include <string>
#include <utility>  // std::pair: named state
#include <vector>

#include "backend/backend.h"  // Backend
#include "core/tensor.h"
#include "optim/optimizer_shard.h"  // ShardPiece: sharded training

namespace dtrain {

class WeightPrediction;  // optim/weight_prediction.h

class Optimizer {
 public:
  Optimizer(Backend& backend, Tensor parameters, Tensor gradients, int64_t trainable_offset);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;  // optimizer.name

  // One optimizer step over the trainable range [trainable_offset, P): begin_step, then the
  // update of every trainable element.
  void step(float lr) { step(lr, parameters_, gradients_); }
  // Same, with other buffers of the model's layout.
  void step(float lr, const Tensor& parameters, const Tensor& gradients) {
    begin_step();
    step_range(lr, parameters, gradients, 0, parameters_.numel());
  }
  // A new optimizer step begins (AdamW: its step count t advances). step() calls it; a scheduler
  // that updates the model in ranges (step_range) calls it once before the ranges of one step.
  virtual void begin_step() {}
  // Only [offset, offset + count) of the flat buffers (clipped to the trainable range), as part
  // of the step begun last.
  void step_range(float lr, int64_t offset, int64_t count) {
    step_range(lr, parameters_, gradients_, offset, count);
  }
  virtual void step_range(float lr, const Tensor& parameters, const Tensor& gradients,
                          int64_t offset, int64_t count) = 0;

  // Sharded training (ZeRO): from now on the optimizer owns `pieces` of the flat buffers only
  // (clipped to the trainable range by the caller), its state is theirs alone (zero, compact:
  // the pieces end to end), and a step updates only them. The buffers a step is given may then
  // each be the model's layout or the compact one of the pieces (told apart by their size):
  // weights stay whole while gradients are sharded (ZeRO-2), both are sharded in ZeRO-3. Before
  // the first step; weight prediction and fresh() are not available then.
  virtual void shard(std::vector<ShardPiece> pieces) = 0;
  // The pieces it owns (empty: the whole buffers) and their elements.
  const std::vector<ShardPiece>& shard_pieces() const { return pieces_; }
  int64_t owned_elements() const;

  // The state a resumed run needs, by name: flat buffers (SGD's momentum, AdamW's moments) and
  // counters (AdamW's step count). load_counter restores a counter that counters() named.
  virtual std::vector<std::pair<std::string, Tensor>> state_buffers() const = 0;
  virtual std::vector<std::pair<std::string, int64_t>> counters() const { return {}; }
  virtual void load_counter(const std::string& name, int64_t value);

  // ---- capabilities (optional: an algorithm that needs one asks, and says what it lacks) ----
  // Weight prediction (SAPipe): the next step's weights without taking it; null when this
  // optimizer cannot predict its step.
  virtual WeightPrediction* prediction() { return nullptr; }
  // The L2 penalty λ the step adds to the gradient (SGD's weight decay: g + λ·w), 0 where decay
  // is decoupled or absent. HPSGD's replica accumulates it with the gradient it communicates.
  virtual float gradient_decay() const { return 0.0f; }
  // λ where a step is w ← w − lr·(g + λ·w) with no state (plain SGD): steps of this form add up,
  // so that HPSGD keeps Σ(g + λw) in the replica's own pass (sgd.h: sgd_step_accumulate);
  // nullopt for any other update.
  virtual std::optional<float> linear_step_decay() const { return std::nullopt; }
  // A new optimizer of this kind and options over other buffers of the model's layout, with a
  // state of its own (zero); without gradient_decay() when `gradient_decay` is false (HPSGD's
  // global model steps with sums that already hold it).
  virtual std::unique_ptr<Optimizer> fresh(Tensor parameters, Tensor gradients,
                                           bool gradient_decay) const = 0;

  int64_t trainable_offset() const { return trainable_offset_; }
  const Tensor& parameters() const { return parameters_; }
  const Tensor& gradients() const { return gradients_; }
  Backend& backend() const { return backend_; }

 protected:
  // [begin, end) of the buffers a call on [offset, offset + count) updates (empty: begin >= end);
  // checks the buffers have the model's size.
  std::pair<int64_t, int64_t> clipped_range(const Tensor& parameters, const Tensor& gradients,
                                            int64_t offset, int64_t count, const char* what) const;

  Backend& backend_;
  Tensor parameters_, gradients_;
  int64_t trainable_offset_;
  std::vector<ShardPiece> pieces_;  // shard(): empty while it owns everything
};

}  // namespace dtrain
