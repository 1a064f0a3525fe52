// The optimizer as the schedulers see it: an update of the flat parameter buffer from the flat
// gradient buffer, over the whole trainable range or a contiguous range of it, with the model's
// own buffers or others of the same layout (a stashed copy, an aggregated gradient); and its
// state by name, for checkpoints. Sgd and AdamW implement it.
#pragma once
#include <cstdint>
#include <string>
#include <utility>  // std::pair: named state
#include <vector>

#include "backend/ops.h"  // GradientSum
#include "core/tensor.h"

namespace dtrain {

class Optimizer {
 public:
  Optimizer(Tensor parameters, Tensor gradients, int64_t trainable_offset);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;  // optimizer.name

  // One optimizer step over the trainable range [trainable_offset, P): begin_step, then the
  // update of every trainable element.
  void step(float lr) { step(lr, parameters_, gradients_); }
  // Same, with other buffers of the model's layout.
  virtual void step(float lr, const Tensor& parameters, const Tensor& gradients) = 0;
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
  // step_range that also writes the change it made to [offset, offset + count), new − old, into
  // the same range of `delta` (SAPipe's Δ), the step itself bit for bit step_range's.
  virtual void step_range_delta(float lr, const Tensor& parameters, const Tensor& gradients,
                                const Tensor& delta, int64_t offset, int64_t count) = 0;
  // Weight prediction (SAPipe): the weights the next step — the one begin_step would begin —
  // would produce on [offset, offset + count) from `parameters` with `gradients`, written to
  // the same range of `out`; the parameters and the optimizer's state stay as they are. It is
  // the step's own arithmetic, so a prediction equals the step it predicts bit for bit.
  virtual void predict_range(float lr, const Tensor& out, const Tensor& parameters,
                             const Tensor& gradients, int64_t offset, int64_t count) const = 0;
  // step_range (part of the step begun last), then predict_range of the step after it from the
  // new weights and state with `ghat`, in one pass.
  virtual void step_predict_range(float lr, const Tensor& parameters, const Tensor& gradients,
                                  const Tensor& ghat, const Tensor& out, int64_t offset,
                                  int64_t count) = 0;

  // SAPipe's wp3 stale step in one pass: step_range with `gradients`, then on the same range
  // gradients ← gradients + α·other and the returned Σ gᵢ·Δᵢ of those with the step's change
  // Δ = new − old (its delay compensation's gᵀΔ), summed in an order fixed by the layout. A
  // backend without the fused kernel writes Δ to `scratch` (the model's size).
  virtual double step_range_dot(float lr, const Tensor& parameters, const Tensor& gradients,
                                float alpha, const Tensor& other, const Tensor& scratch,
                                int64_t offset, int64_t count) = 0;
  // predict_range with the gradient α·x + β·y formed in the pass (GradientSum, the model's size);
  // a backend without the fused kernel writes it into `ghat.y` first.
  virtual void predict_range_sum(float lr, const Tensor& out, const Tensor& parameters,
                                 const GradientSum& ghat, int64_t offset, int64_t count) const = 0;

  // The state a resumed run needs, by name: flat buffers (SGD's momentum, AdamW's moments) and
  // counters (AdamW's step count). load_counter restores a counter that counters() named.
  virtual std::vector<std::pair<std::string, Tensor>> state_buffers() const = 0;
  virtual std::vector<std::pair<std::string, int64_t>> counters() const { return {}; }
  virtual void load_counter(const std::string& name, int64_t value);

  int64_t trainable_offset() const { return trainable_offset_; }
  const Tensor& parameters() const { return parameters_; }
  const Tensor& gradients() const { return gradients_; }

 protected:
  // [begin, end) of the buffers a call on [offset, offset + count) updates (empty: begin >= end);
  // checks the buffers have the model's size.
  std::pair<int64_t, int64_t> clipped_range(const Tensor& parameters, const Tensor& gradients,
                                            int64_t offset, int64_t count, const char* what) const;

  Tensor parameters_, gradients_;
  int64_t trainable_offset_;
};

}  // namespace dtrain
