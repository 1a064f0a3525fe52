// The backward of a ReLU fused into the op that produced its output (ops.h): the gradient
// counts only where the activated output is positive.
#pragma once
#include <cstdint>  // int64_t

namespace dtrain::cpu {

// out = y > 0 ? dy : 0, element-wise over n floats.
inline void relu_mask(const float* y, const float* dy, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace dtrain::cpu
