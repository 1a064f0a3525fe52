// Bias + ReLU epilogues of Linear and Conv2d and the ReLU backward mask (relu_mask.h on CPU);
// ReLU and dropout on bf16 activations (the f32 dropout kernels are in loss.cu).
#include "backend/cuda/bf16.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "core/rng.h"  // random_uniform (constexpr: usable in device code)

namespace dtrain::cuda {
namespace {

template <bool kBias, bool kRelu>
__global__ void bias_relu_kernel(const float* x, const float* bias, float* y, int64_t n,
                                 int64_t channels, int64_t inner) {
  DTRAIN_GRID_STRIDE(i, n) {
    float v = x[i];
    if (kBias) v += bias[(i / inner) % channels];
    if (kRelu) v = v > 0.0f ? v : 0.0f;
    y[i] = v;
  }
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void relu_forward_bf16_kernel(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) {
    const float v = load_f32(x, i);
    store_f32(y, i, v > 0.0f ? v : 0.0f);
  }
}
__global__ void relu_backward_bf16_kernel(const __nv_bfloat16* y, const __nv_bfloat16* dy,
                                          __nv_bfloat16* dx, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) store_f32(dx, i, load_f32(y, i) > 0.0f ? load_f32(dy, i) : 0.0f);
}

// The draw of loss.cu's f32 kernel (element i's uniform against p), so the masks are equal.
__global__ void dropout_forward_bf16_kernel(const __nv_bfloat16* x, __nv_bfloat16* y, uint8_t* mask,
                                            int64_t n, float p, float keep_scale, uint64_t seed,
                                            uint64_t rng_stream) {
  DTRAIN_GRID_STRIDE(i, n) {
    const bool keep = random_uniform(seed, rng_stream, static_cast<uint64_t>(i)) >= p;
    mask[i] = keep;
    store_f32(y, i, keep ? load_f32(x, i) * keep_scale : 0.0f);
  }
}
__global__ void dropout_backward_bf16_kernel(const __nv_bfloat16* dy, const uint8_t* mask,
                                             __nv_bfloat16* dx, int64_t n, float keep_scale) {
  DTRAIN_GRID_STRIDE(i, n) store_f32(dx, i, mask[i] ? load_f32(dy, i) * keep_scale : 0.0f);
}

// As the CPU: 1/(1 − p), and 0 when every element is dropped.
float keep_scale_for(float p) {
  return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

}  // namespace

void relu_forward_bf16(const uint16_t* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  relu_forward_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(as_bf16(x), as_bf16(y), n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void relu_backward_bf16(const uint16_t* y, const uint16_t* dy, uint16_t* dx, int64_t n,
                        cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(as_bf16(y), as_bf16(dy),
                                                                  as_bf16(dx), n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void dropout_forward_bf16(const uint16_t* x, uint16_t* y, uint8_t* mask, int64_t n, float p,
                          uint64_t seed, uint64_t rng_stream, cudaStream_t stream) {
  if (n <= 0) return;
  dropout_forward_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(
      as_bf16(x), as_bf16(y), mask, n, p, keep_scale_for(p), seed, rng_stream);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void dropout_backward_bf16(const uint16_t* dy, const uint8_t* mask, uint16_t* dx, int64_t n,
                           float p, cudaStream_t stream) {
  if (n <= 0) return;
  dropout_backward_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(as_bf16(dy), mask, as_bf16(dx),
                                                                     n, keep_scale_for(p));
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void bias_relu_f32(const float* x, const float* bias, float* y, int64_t n, int64_t channels,
                   int64_t inner, bool relu, cudaStream_t stream) {
  if (n <= 0 || (!bias && !relu && x == y)) return;
  const unsigned grid = grid_for(n);
  if (bias && relu)
    bias_relu_kernel<true, true><<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  else if (bias)
    bias_relu_kernel<true, false><<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  else if (relu)
    bias_relu_kernel<false, true><<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  else
    bias_relu_kernel<false, false><<<grid, kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void relu_backward_f32(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, dy, dx, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace dtrain::cuda
