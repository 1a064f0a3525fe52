// SGD with momentum, dampening, weight decay and Nesterov (torch.optim.SGD's semantics): the
// `sgd` row of the optimizer table (sgd.cpp), its rule in sgd_rule.h. Weight decay is PyTorch's
// L2 penalty, added to the gradient of every parameter.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "core/tensor.h"
#include "optim/optimizer.h"

namespace dtrain {

struct SgdOptions {
  double momentum = 0.9, dampening = 0, weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0
};

// SGD over the flat buffers; [0, trainable_offset) is never touched.
std::unique_ptr<Optimizer> make_sgd(Backend& backend, Tensor parameters, Tensor gradients,
                                    const SgdOptions& options, int64_t trainable_offset = 0);

// HPSGD's replica step, plain SGD that keeps what it stepped with, in one pass:
//   ĝ ← g + wd·w;  sum ← add ? sum + ĝ : ĝ;  w ← w − lr·ĝ
// Gradients are left unchanged; with wd = 0, ĝ is g exactly.
void sgd_step_accumulate(Backend& backend, const Tensor& weights, const Tensor& gradients,
                         const Tensor& sum, float lr, float weight_decay, bool add);

}  // namespace dtrain
