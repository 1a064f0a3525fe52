// Weight prediction, SAPipe's capability of an optimizer (Optimizer::prediction()): the weights
// the optimizer's next step would produce, without taking it, and the fused passes SAPipe's
// compensations run around a step. Each is the step's own arithmetic on other inputs, so that a
// prediction equals the step it predicts bit for bit.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace dtrain {

// ĝ = α·x + β·y, formed element by element inside the pass that uses it (SAPipe's wp3 prediction
// gradient: the compensated all-reduced gradient plus this rank's newest own one), so that it
// costs no pass of its own. x and y have the size of the buffers they go with.
struct GradientSum {
  float alpha = 1.0f;
  Tensor x;
  float beta = 0.0f;
  Tensor y;
};

class WeightPrediction {
 public:
  virtual ~WeightPrediction() = default;
  // step_range that also writes the change it made to [offset, offset + count), new − old, into
  // the same range of `delta` (SAPipe's Δ), the step itself bit for bit step_range's.
  virtual void step_range_delta(float lr, const Tensor& parameters, const Tensor& gradients,
                                const Tensor& delta, int64_t offset, int64_t count) = 0;
  // The weights the next step — the one begin_step would begin — would produce on
  // [offset, offset + count) from `parameters` with `gradients`, written to the same range of
  // `out`; the parameters and the optimizer's state stay as they are.
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
  // backend that cannot sum while it passes writes Δ to `scratch` (the model's size).
  virtual double step_range_dot(float lr, const Tensor& parameters, const Tensor& gradients,
                                float alpha, const Tensor& other, const Tensor& scratch,
                                int64_t offset, int64_t count) = 0;
  // predict_range with the gradient α·x + β·y formed in the pass (GradientSum, the model's size).
  virtual void predict_range_sum(float lr, const Tensor& out, const Tensor& parameters,
                                 const GradientSum& ghat, int64_t offset, int64_t count) const = 0;
};

}  // namespace dtrain
