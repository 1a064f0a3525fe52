// AdamW (torch.optim.AdamW: decoupled weight decay, bias-corrected moments) on the flat
// parameter and gradient buffers: one fused backend pass (Backend::adamw_step) per run of
// parameters that share their weight decay. As nanoGPT's configure_optimizers groups them,
// only parameters of two or more dimensions (matrices, convolution kernels, embeddings) decay;
// biases, LayerNorm weights and other 1-D tensors do not.
#pragma once
#include <vector>

#include "backend/backend.h"  // Backend, AdamWHyper
#include "core/tensor.h"
#include "optim/optimizer.h"  // Optimizer

namespace dtrain {

struct AdamWOptions {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
};

// A run of the flat parameter buffer and whether weight decay applies to it.
struct DecayRange {
  int64_t offset = 0, count = 0;
  bool decay = true;
};

class AdamW final : public Optimizer {
 public:
  // `ranges` say which parts of the buffers decay (elements they do not cover decay); the
  // frozen prefix [0, trainable_offset) is never touched. m and v start at zero, the step
  // count at 0.
  AdamW(Backend& backend, Tensor parameters, Tensor gradients, const AdamWOptions& options,
        std::vector<DecayRange> ranges, int64_t trainable_offset = 0);

  std::string name() const override { return "adamw"; }
  using Optimizer::step;
  using Optimizer::step_range;
  void step(float lr, const Tensor& parameters, const Tensor& gradients) override;
  void begin_step() override { ++step_; }
  // Part of the step begun last, with its step count t (bias correction).
  void step_range(float lr, const Tensor& parameters, const Tensor& gradients, int64_t offset,
                  int64_t count) override;
  // step_range between a copy of the weights into `delta` and the subtraction (three passes).
  void step_range_delta(float lr, const Tensor& parameters, const Tensor& gradients,
                        const Tensor& delta, int64_t offset, int64_t count) override;
  // Weight prediction (SAPipe): the weights step_range of the next step (count t + 1, from the
  // moments as they are) would write with `gradients` — the bias-corrected m̂/(√v̂ + ε) direction
  // and the decoupled decay of that step — into `out`; the weights, m, v and t unchanged
  // (Backend::adamw_predict).
  void predict_range(float lr, const Tensor& out, const Tensor& parameters, const Tensor& gradients,
                     int64_t offset, int64_t count) const override;
  // step_range (count t), then predict_range (count t + 1) from its new weights and moments with
  // `ghat`, in one pass (Backend::adamw_step_predict).
  void step_predict_range(float lr, const Tensor& parameters, const Tensor& gradients,
                          const Tensor& ghat, const Tensor& out, int64_t offset,
                          int64_t count) override;
  // One pass each (Backend::adamw_step_dot, adamw_predict_sum).
  double step_range_dot(float lr, const Tensor& parameters, const Tensor& gradients, float alpha,
                        const Tensor& other, const Tensor& scratch, int64_t offset,
                        int64_t count) override;
  void predict_range_sum(float lr, const Tensor& out, const Tensor& parameters,
                         const GradientSum& ghat, int64_t offset, int64_t count) const override;

  // "m" and "v" (the first and second moments) and the counter "step".
  std::vector<std::pair<std::string, Tensor>> state_buffers() const override;
  std::vector<std::pair<std::string, int64_t>> counters() const override;
  void load_counter(const std::string& name, int64_t value) override;

  int64_t steps() const { return step_; }
  const AdamWOptions& options() const { return options_; }
  // The runs of equal decay, merged, covering the whole buffer in order.
  const std::vector<DecayRange>& ranges() const { return ranges_; }

 private:
  Backend& backend_;
  AdamWOptions options_;
  std::vector<DecayRange> ranges_;
  Tensor m_, v_;
  int64_t step_ = 0;
};

}  // namespace dtrain
