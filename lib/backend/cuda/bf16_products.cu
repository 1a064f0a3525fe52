// The bf16 helpers of Linear and Conv2d: the per-call conversion of the f32 master weights, the
// widening of bf16 activations for the f32 weight-gradient passes, the bias/ReLU epilogue that
// rounds an f32 product once into bf16, and the fused ReLU's mask over bf16 values. Every kernel
// reads bf16 exactly, computes in f32 and rounds once to nearest even (__float2bfloat16_rn, as
// the CPU's f32_to_bf16).
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace dtrain::cuda {
namespace {

__device__ __forceinline__ float widen(uint16_t bits) {
  return __uint_as_float(static_cast<unsigned>(bits) << 16);  // exact
}
__device__ __forceinline__ uint16_t narrow(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

__global__ void f32_to_bf16_kernel(const float* x, uint16_t* y, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) y[i] = narrow(x[i]);
}

__global__ void bf16_to_f32_kernel(const uint16_t* x, float* y, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) y[i] = widen(x[i]);
}

__global__ void fill_bf16_kernel(uint16_t* x, uint16_t bits, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) x[i] = bits;
}

template <bool kBias, bool kRelu>
__global__ void bias_relu_to_bf16_kernel(const float* x, const float* bias, uint16_t* y, int64_t n,
                                         int64_t channels, int64_t inner) {
  DTRAIN_GRID_STRIDE(i, n) {
    float v = x[i];
    if (kBias) v += bias[(i / inner) % channels];
    if (kRelu) v = v > 0.0f ? v : 0.0f;
    y[i] = narrow(v);
  }
}

// The same epilogue on a bf16 product (cuDNN's bf16 convolutions store bf16): widened exactly,
// rounded once more after the bias.
template <bool kBias, bool kRelu>
__global__ void bias_relu_bf16_kernel(const uint16_t* x, const float* bias, uint16_t* y, int64_t n,
                                      int64_t channels, int64_t inner) {
  DTRAIN_GRID_STRIDE(i, n) {
    float v = widen(x[i]);
    if (kBias) v += bias[(i / inner) % channels];
    if (kRelu) v = v > 0.0f ? v : 0.0f;
    y[i] = narrow(v);
  }
}

// The sign test on the bf16 bits' value, as relu_mask over bf16 on the CPU: a positive y keeps
// dy's bits unchanged (no rounding), anything else (zero, negative, NaN) gives +0.
__global__ void relu_backward_bf16_kernel(const uint16_t* y, const uint16_t* dy, uint16_t* dx,
                                          int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) dx[i] = widen(y[i]) > 0.0f ? dy[i] : uint16_t{0};
}

}  // namespace

void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  f32_to_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  bf16_to_f32_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void fill_bf16(uint16_t* x, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  const uint16_t bits = __bfloat16_as_ushort(__float2bfloat16_rn(value));
  fill_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, bits, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void bias_relu_to_bf16(const float* x, const float* bias, uint16_t* y, int64_t n, int64_t channels,
                       int64_t inner, bool relu, cudaStream_t stream) {
  if (n <= 0) return;
  const unsigned grid = grid_for(n);
  if (bias && relu)
    bias_relu_to_bf16_kernel<true, true>
        <<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  else if (bias)
    bias_relu_to_bf16_kernel<true, false>
        <<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  else if (relu)
    bias_relu_to_bf16_kernel<false, true>
        <<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  else
    bias_relu_to_bf16_kernel<false, false>
        <<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void bias_relu_bf16(const uint16_t* x, const float* bias, uint16_t* y, int64_t n, int64_t channels,
                    int64_t inner, bool relu, cudaStream_t stream) {
  if (n <= 0 || (!bias && !relu && x == y)) return;
  const unsigned grid = grid_for(n);
  if (bias && relu)
    bias_relu_bf16_kernel<true, true>
        <<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  else if (bias)
    bias_relu_bf16_kernel<true, false>
        <<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  else if (relu)
    bias_relu_bf16_kernel<false, true>
        <<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  else
    bias_relu_bf16_kernel<false, false>
        <<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void relu_backward_bf16(const uint16_t* y, const uint16_t* dy, uint16_t* dx, int64_t n,
                        cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, dy, dx, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace dtrain::cuda
