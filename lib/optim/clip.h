// Gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_: the gradients are
// scaled by max_norm / (norm + 1e-6) when that is below 1, and left as they are otherwise.
#pragma once
#include "backend/backend.h"  // Backend: dot, scale
#include "core/tensor.h"

namespace dtrain {

// The coefficient clip_grad_norm applies for a gradient of L2 norm `norm`: min(1, max_norm /
// (norm + 1e-6)).
double clip_coefficient(double norm, double max_norm);

// Clips `gradients` (the whole model's, flat) to the L2 norm `max_norm` (> 0) and returns their
// norm before clipping. The norm is summed in double in an order fixed by the size
// (Backend::dot), so equal gradients on every rank give an equal norm and an equal clip.
double clip_grad_norm(Backend& backend, const Tensor& gradients, double max_norm);

}  // namespace dtrain
