// Pooling for windows that overhang the input (cuDNN sizes its output with floor only) and the
// batch-norm statistics helper. The pooling arithmetic repeats cpu_pool.cpp operation by
// operation, so the results match the reference bit for bit. The pooling kernels take f32 or
// bf16 activations (E): bf16 values are widened, summed and compared in f32 and rounded once.
#include <math_constants.h>  // CUDART_INF_F

#include "backend/cuda/bf16.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/norm_kernels.h"

namespace dtrain::cuda {
namespace {

__device__ inline int64_t imin(int64_t a, int64_t b) {
  return a < b ? a : b;
}

struct Window {
  int64_t hs, ws;          // the unclipped window's first row and column (may be negative)
  int64_t h0, h1, w0, w1;  // clipped to the input
};

__device__ inline Window window_at(const PoolGeometry& g, int64_t i, int64_t j) {
  Window w;
  w.hs = i * g.stride_h - g.pad_h;
  w.ws = j * g.stride_w - g.pad_w;
  w.h0 = w.hs > 0 ? w.hs : 0;
  w.h1 = imin(w.hs + g.kernel_h, g.height);
  w.w0 = w.ws > 0 ? w.ws : 0;
  w.w1 = imin(w.ws + g.kernel_w, g.width);
  return w;
}

// Include-padding averages count the window up to the padded border, not beyond it (a ceil
// mode window may reach past it); exclude-padding ones count the inputs.
__device__ inline float divisor(const PoolGeometry& g, const Window& w) {
  if (!g.include_padding) return static_cast<float>((w.h1 - w.h0) * (w.w1 - w.w0));
  const int64_t he = imin(w.hs + g.kernel_h, g.height + g.pad_h);
  const int64_t we = imin(w.ws + g.kernel_w, g.width + g.pad_w);
  return static_cast<float>((he - w.hs) * (we - w.ws));
}

// The outputs along one axis whose windows contain input position `x`: [first, last].
struct Range {
  int64_t first, last;
};
__device__ inline Range covering(int64_t x, int64_t kernel, int64_t stride, int64_t pad,
                                 int64_t outputs) {
  const int64_t lo = x + pad - kernel + 1;  // window i contains x ⇔ lo ≤ i·stride ≤ x + pad
  const int64_t first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  const int64_t last = imin((x + pad) / stride, outputs - 1);
  return {first, last};
}

template <typename E>
__global__ void max_pool_forward_kernel(const E* x, E* y, int32_t* argmax, int64_t n,
                                        PoolGeometry g) {
  const int64_t out_plane = g.out_height * g.out_width, in_plane = g.height * g.width;
  DTRAIN_GRID_STRIDE(idx, n) {
    const int64_t o = idx % out_plane;
    const E* in = x + idx / out_plane * in_plane;
    const Window w = window_at(g, o / g.out_width, o % g.out_width);
    float best = -CUDART_INF_F;
    int32_t at = static_cast<int32_t>(w.h0 * g.width + w.w0);
    for (int64_t h = w.h0; h < w.h1; ++h)
      for (int64_t c = w.w0; c < w.w1; ++c) {
        const float v = load_f32(in, h * g.width + c);
        if (v > best) best = v, at = static_cast<int32_t>(h * g.width + c);
      }
    store_f32(y, idx, best);
    if (argmax) argmax[idx] = at;
  }
}

template <typename E>
__global__ void max_pool_backward_kernel(const E* dy, const int32_t* argmax, E* dx, int64_t n,
                                         PoolGeometry g) {
  const int64_t out_plane = g.out_height * g.out_width, in_plane = g.height * g.width;
  DTRAIN_GRID_STRIDE(idx, n) {
    const int64_t q = idx % in_plane, base = idx / in_plane * out_plane;
    const int64_t h = q / g.width, c = q % g.width;
    const Range ri = covering(h, g.kernel_h, g.stride_h, g.pad_h, g.out_height);
    const Range rj = covering(c, g.kernel_w, g.stride_w, g.pad_w, g.out_width);
    float sum = 0.0f;
    for (int64_t i = ri.first; i <= ri.last; ++i)
      for (int64_t j = rj.first; j <= rj.last; ++j) {
        const int64_t o = base + i * g.out_width + j;
        if (argmax[o] == q) sum += load_f32(dy, o);
      }
    store_f32(dx, idx, sum);
  }
}

template <typename E>
__global__ void avg_pool_forward_kernel(const E* x, E* y, int64_t n, PoolGeometry g) {
  const int64_t out_plane = g.out_height * g.out_width, in_plane = g.height * g.width;
  DTRAIN_GRID_STRIDE(idx, n) {
    const int64_t o = idx % out_plane;
    const E* in = x + idx / out_plane * in_plane;
    const Window w = window_at(g, o / g.out_width, o % g.out_width);
    float sum = 0.0f;
    for (int64_t h = w.h0; h < w.h1; ++h)
      for (int64_t c = w.w0; c < w.w1; ++c) sum += load_f32(in, h * g.width + c);
    store_f32(y, idx, sum / divisor(g, w));
  }
}

template <typename E>
__global__ void avg_pool_backward_kernel(const E* dy, E* dx, int64_t n, PoolGeometry g) {
  const int64_t out_plane = g.out_height * g.out_width, in_plane = g.height * g.width;
  DTRAIN_GRID_STRIDE(idx, n) {
    const int64_t q = idx % in_plane, base = idx / in_plane * out_plane;
    const int64_t h = q / g.width, c = q % g.width;
    const Range ri = covering(h, g.kernel_h, g.stride_h, g.pad_h, g.out_height);
    const Range rj = covering(c, g.kernel_w, g.stride_w, g.pad_w, g.out_width);
    float sum = 0.0f;
    for (int64_t i = ri.first; i <= ri.last; ++i)
      for (int64_t j = rj.first; j <= rj.last; ++j)
        sum += load_f32(dy, base + i * g.out_width + j) / divisor(g, window_at(g, i, j));
    store_f32(dx, idx, sum);
  }
}

__global__ void inv_std_kernel(const float* variance, float* inv_std, int64_t n, float eps) {
  DTRAIN_GRID_STRIDE(i, n) inv_std[i] = 1.0f / sqrtf(variance[i] + eps);
}

template <typename E>
void max_pool_forward(const E* x, E* y, int32_t* argmax, int64_t planes, const PoolGeometry& g,
                      cudaStream_t stream) {
  const int64_t n = planes * g.out_height * g.out_width;
  if (n <= 0) return;
  max_pool_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, argmax, n, g);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

template <typename E>
void max_pool_backward(const E* dy, const int32_t* argmax, E* dx, int64_t planes,
                       const PoolGeometry& g, cudaStream_t stream) {
  const int64_t n = planes * g.height * g.width;
  if (n <= 0) return;
  max_pool_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, argmax, dx, n, g);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

template <typename E>
void avg_pool_forward(const E* x, E* y, int64_t planes, const PoolGeometry& g,
                      cudaStream_t stream) {
  const int64_t n = planes * g.out_height * g.out_width;
  if (n <= 0) return;
  avg_pool_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n, g);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

template <typename E>
void avg_pool_backward(const E* dy, E* dx, int64_t planes, const PoolGeometry& g,
                       cudaStream_t stream) {
  const int64_t n = planes * g.height * g.width;
  if (n <= 0) return;
  avg_pool_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, dx, n, g);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void max_pool_forward_f32(const float* x, float* y, int32_t* argmax, int64_t planes,
                          const PoolGeometry& g, cudaStream_t stream) {
  max_pool_forward(x, y, argmax, planes, g, stream);
}
void max_pool_backward_f32(const float* dy, const int32_t* argmax, float* dx, int64_t planes,
                           const PoolGeometry& g, cudaStream_t stream) {
  max_pool_backward(dy, argmax, dx, planes, g, stream);
}
void avg_pool_forward_f32(const float* x, float* y, int64_t planes, const PoolGeometry& g,
                          cudaStream_t stream) {
  avg_pool_forward(x, y, planes, g, stream);
}
void avg_pool_backward_f32(const float* dy, float* dx, int64_t planes, const PoolGeometry& g,
                           cudaStream_t stream) {
  avg_pool_backward(dy, dx, planes, g, stream);
}

void max_pool_forward_bf16(const uint16_t* x, uint16_t* y, int32_t* argmax, int64_t planes,
                           const PoolGeometry& g, cudaStream_t stream) {
  max_pool_forward(as_bf16(x), as_bf16(y), argmax, planes, g, stream);
}
void max_pool_backward_bf16(const uint16_t* dy, const int32_t* argmax, uint16_t* dx, int64_t planes,
                            const PoolGeometry& g, cudaStream_t stream) {
  max_pool_backward(as_bf16(dy), argmax, as_bf16(dx), planes, g, stream);
}
void avg_pool_forward_bf16(const uint16_t* x, uint16_t* y, int64_t planes, const PoolGeometry& g,
                           cudaStream_t stream) {
  avg_pool_forward(as_bf16(x), as_bf16(y), planes, g, stream);
}
void avg_pool_backward_bf16(const uint16_t* dy, uint16_t* dx, int64_t planes, const PoolGeometry& g,
                            cudaStream_t stream) {
  avg_pool_backward(as_bf16(dy), as_bf16(dx), planes, g, stream);
}

void inv_std_f32(const float* variance, float* inv_std, int64_t n, float epsilon,
                 cudaStream_t stream) {
  if (n <= 0) return;
  inv_std_kernel<<<grid_for(n), kThreads, 0, stream>>>(variance, inv_std, n, epsilon);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace dtrain::cuda
