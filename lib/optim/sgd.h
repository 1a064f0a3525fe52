// SGD with momentum, weight decay and Nesterov (PyTorch semantics) on the flat parameter and
// gradient buffers: one fused backend call per step, or per contiguous segment when a
// scheduler updates parts of the model as their gradients arrive.
#pragma once
#include "backend/backend.h"  // Backend, SgdHyper
#include "core/tensor.h"
#include "optim/optimizer.h"  // Optimizer

namespace dtrain {

struct SgdOptions {
  float momentum = 0.9f, dampening = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
};

class Sgd final : public Optimizer {
 public:
  // Updates parameters[trainable_offset, P) from gradients of the same range; the frozen
  // prefix [0, trainable_offset) is never touched.
  Sgd(Backend& backend, Tensor parameters, Tensor gradients, const SgdOptions& options,
      int64_t trainable_offset = 0);

  std::string name() const override { return "sgd"; }
  using Optimizer::step;
  using Optimizer::step_range;
  // step(lr) with other buffers of the model's layout (a stashed or predicted copy, an
  // aggregated gradient from the communication thread).
  void step(float lr, const Tensor& parameters, const Tensor& gradients) override;
  // Only [offset, offset + count) of the flat buffers (clipped to the trainable range), with
  // other buffers of the model's layout (SAPipe steps its stale prefix and its fresh layers at
  // different times, from gradient slots of its own). SGD keeps no step count: any order works.
  void step_range(float lr, const Tensor& parameters, const Tensor& gradients, int64_t offset,
                  int64_t count) override;
  // One pass (Backend::sgd_step_delta).
  void step_range_delta(float lr, const Tensor& parameters, const Tensor& gradients,
                        const Tensor& delta, int64_t offset, int64_t count) override;
  // The weights step_range would produce, written to the same range of `out`, with the weights
  // and the momentum unchanged (SAPipe's weight prediction: Backend::sgd_predict).
  void predict_range(float lr, const Tensor& out, const Tensor& parameters, const Tensor& gradients,
                     int64_t offset, int64_t count) const override;
  // step_range, then predict_range from its result with `ghat`, in one pass
  // (Backend::sgd_step_predict).
  void step_predict_range(float lr, const Tensor& parameters, const Tensor& gradients,
                          const Tensor& ghat, const Tensor& out, int64_t offset,
                          int64_t count) override;
  // One pass each (Backend::sgd_step_dot, sgd_predict_sum).
  double step_range_dot(float lr, const Tensor& parameters, const Tensor& gradients, float alpha,
                        const Tensor& other, const Tensor& scratch, int64_t offset,
                        int64_t count) override;
  void predict_range_sum(float lr, const Tensor& out, const Tensor& parameters,
                         const GradientSum& ghat, int64_t offset, int64_t count) const override;

  const Tensor& momentum() const { return momentum_; }
  const SgdOptions& options() const { return options_; }
  // "momentum" when there is one (the checkpoint's optimizer.momentum).
  std::vector<std::pair<std::string, Tensor>> state_buffers() const override;

 private:
  SgdHyper hyper(float lr) const {
    return {lr, options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov};
  }
  // The momentum of [begin, begin + s) (undefined without momentum).
  Tensor momentum_part(int64_t begin, const Shape& s) const {
    return momentum_.defined() ? momentum_.slice(begin, s) : Tensor();
  }

  Backend& backend_;
  Tensor momentum_;
  SgdOptions options_;
};

}  // namespace dtrain
