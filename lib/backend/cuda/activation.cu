// Bias + ReLU epilogues of Linear and Conv2d and the ReLU backward mask (relu_mask.h on CPU).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

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

}  // namespace

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
