#include "optim/clip.h"

#include <algorithm>  // min
#include <cmath>      // sqrt

namespace dtrain {

double clip_coefficient(double norm, double max_norm) {
  return std::min(1.0, max_norm / (norm + 1e-6));
}

double clip_grad_norm(Backend& backend, const Tensor& gradients, double max_norm) {
  const double norm = std::sqrt(backend.dot(gradients, gradients));
  const double coefficient = clip_coefficient(norm, max_norm);
  // PyTorch multiplies by the clamped coefficient whatever it is; a factor of exactly 1 changes
  // no value, so it is skipped.
  if (coefficient < 1.0) backend.scale(gradients, static_cast<float>(coefficient));
  return norm;
}

}  // namespace dtrain
