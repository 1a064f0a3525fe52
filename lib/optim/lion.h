// Lion (Chen et al. 2023): the sign of an interpolation of the gradient and one moment, with
// decoupled weight decay — the `lion` row of the optimizer table (lion.cpp), its rule in
// lion_rule.h. One state buffer (AdamW keeps two); decay as AdamW's (decay.h).
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "optim/decay.h"  // DecayRange
#include "optim/optimizer.h"

namespace dtrain {

struct LionOptions {
  std::vector<double> betas{0.9, 0.99};  // [β1: the signed interpolation, β2: the moment's decay]
  double weight_decay = 0;               // decoupled, as the paper's reference code
};

// Lion over the flat buffers: m starts at zero. Elements that `decay` does not cover decay;
// [0, trainable_offset) is never touched.
std::unique_ptr<Optimizer> make_lion(Backend& backend, Tensor parameters, Tensor gradients,
                                     const LionOptions& options, std::vector<DecayRange> decay,
                                     int64_t trainable_offset = 0);

}  // namespace dtrain
