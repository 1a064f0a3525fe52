// GELU forward and backward kernels: the formulas of PyTorch's nn.GELU, exact (erf) and tanh
// forms, in float. The CPU op (cpu_gelu.cpp) and a double reference are what they are tested
// against (tests/backend/test_cuda_ops.cpp).
#include "backend/cuda/bf16.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace dtrain::cuda {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752440f;     // 1/√2
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;   // 1/√(2π)
constexpr float kSqrt2OverPi = 0.79788456080286535588f;  // √(2/π)
constexpr float kKappa = 0.044715f;

// E: float or __nv_bfloat16 (read widened, computed in f32, rounded once when stored).
template <bool kTanh, typename E>
__global__ void gelu_forward_kernel(const E* x, E* y, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) {
    const float v = load_f32(x, i);
    if (kTanh)
      store_f32(y, i, 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kKappa * v * v * v))));
    else
      store_f32(y, i, 0.5f * v * (1.0f + erff(v * kSqrtHalf)));
  }
}

// gelu'(x): Φ(x) + x·φ(x), or for the tanh form ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3κx²).
template <bool kTanh, typename E>
__global__ void gelu_backward_kernel(const E* x, const E* dy, E* dx, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) {
    const float v = load_f32(x, i);
    float d;
    if (kTanh) {
      const float v2 = v * v;
      const float t = tanhf(kSqrt2OverPi * (v + kKappa * v2 * v));
      d = 0.5f * (1.0f + t) +
          0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kKappa * v2);
    } else {
      d = 0.5f * (1.0f + erff(v * kSqrtHalf)) + v * kInvSqrt2Pi * expf(-0.5f * v * v);
    }
    store_f32(dx, i, load_f32(dy, i) * d);
  }
}

template <typename E>
void gelu_forward(const E* x, E* y, int64_t n, bool tanh, cudaStream_t stream) {
  if (n <= 0) return;
  if (tanh)
    gelu_forward_kernel<true><<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  else
    gelu_forward_kernel<false><<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

template <typename E>
void gelu_backward(const E* x, const E* dy, E* dx, int64_t n, bool tanh, cudaStream_t stream) {
  if (n <= 0) return;
  if (tanh)
    gelu_backward_kernel<true><<<grid_for(n), kThreads, 0, stream>>>(x, dy, dx, n);
  else
    gelu_backward_kernel<false><<<grid_for(n), kThreads, 0, stream>>>(x, dy, dx, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gelu_forward_f32(const float* x, float* y, int64_t n, bool tanh, cudaStream_t stream) {
  gelu_forward(x, y, n, tanh, stream);
}

void gelu_backward_f32(const float* x, const float* dy, float* dx, int64_t n, bool tanh,
                       cudaStream_t stream) {
  gelu_backward(x, dy, dx, n, tanh, stream);
}

void gelu_forward_bf16(const uint16_t* x, uint16_t* y, int64_t n, bool tanh, cudaStream_t stream) {
  gelu_forward(as_bf16(x), as_bf16(y), n, tanh, stream);
}

void gelu_backward_bf16(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, bool tanh,
                        cudaStream_t stream) {
  gelu_backward(as_bf16(x), as_bf16(dy), as_bf16(dx), n, tanh, stream);
}

}  // namespace dtrain::cuda
