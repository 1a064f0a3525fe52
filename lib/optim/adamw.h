// AdamW (torch.optim.AdamW: decoupled weight decay, bias-corrected moments): the `adamw` row of
// the optimizer table (adamw.cpp), its rule in adamw_rule.h. As nanoGPT's configure_optimizers
// groups them, only the ranges that decay (decay.h: parameters of two or more dimensions) decay.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "optim/decay.h"  // DecayRange
#include "optim/optimizer.h"

namespace dtrain {

struct AdamWOptions {
  double weight_decay = 0.01;             // PyTorch's default
  std::vector<double> betas{0.9, 0.999};  // the moments' decay rates
  double eps = 1e-8;
};

// AdamW over the flat buffers: m and v start at zero, the step count at 0. Elements that
// `decay` does not cover decay; [0, trainable_offset) is never touched.
std::unique_ptr<Optimizer> make_adamw(Backend& backend, Tensor parameters, Tensor gradients,
                                      const AdamWOptions& options, std::vector<DecayRange> decay,
                                      int64_t trainable_offset = 0);

}  // namespace dtrain
