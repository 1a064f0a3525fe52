// The bf16 helpers of Linear and Conv2d: the bias/ReLU epilogues that round an f32 product (or
// widen a bf16 one) once into bf16, and a bf16 fill (the bias gradient's ones). The casts and
// the fused ReLU's mask over bf16 are elementwise.cu's and activation.cu's. Every kernel
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

}  // namespace

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

}  // namespace dtrain::cuda
