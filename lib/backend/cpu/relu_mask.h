// The backward of a ReLU fused into the op that produced its output (ops.h): the gradient
// counts only where the activated output is positive.
#pragma once
#include <cstdint>  // int64_t

#include "backend/cpu/bf16.h"  // bf16_t: mixed precision's activations

namespace dtrain::cpu {

// out = y > 0 ? dy : 0, element-wise over n floats.
inline void relu_mask(const float* y, const float* dy, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// The same over n bf16 values. The gradient is copied, not rounded: it is bf16 already. y is
// compared as the f32 it stands for, so that a NaN output blocks the gradient as in f32.
inline void relu_mask(const bf16_t* y, const bf16_t* dy, bf16_t* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(y[i]) > 0.0f ? dy[i] : bf16_t{0};
}

// The same, widening the bf16 gradient to f32 (exactly) in the same pass: the masked gradient
// that the bf16 products run on the f32 kernels read (bf16_widened.h).
inline void relu_mask(const bf16_t* y, const bf16_t* dy, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(y[i]) > 0.0f ? bf16_to_f32(dy[i]) : 0.0f;
}

}  // namespace dtrain::cpu
