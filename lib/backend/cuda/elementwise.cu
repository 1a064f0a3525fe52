// Element-wise and flat-buffer kernels. The arithmetic follows the CPU loops term by term and
// is compiled without FMA contraction (-fmad=false for this folder), so that results match the
// reference bit for bit where the CPU does the same float operations.
#include "backend/cuda/bf16.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace dtrain::cuda {
namespace {

__global__ void fill_kernel(float* x, int64_t n, float value) {
  DTRAIN_GRID_STRIDE(i, n) x[i] = value;
}
// E: float or __nv_bfloat16 (the sum in f32, rounded once as it is stored).
template <typename E>
__global__ void add_kernel(const E* a, const E* b, E* out, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) store_f32(out, i, load_f32(a, i) + load_f32(b, i));
}
template <typename E>
__global__ void add_relu_kernel(const E* a, const E* b, E* out, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) {
    const float v = load_f32(a, i) + load_f32(b, i);
    store_f32(out, i, v > 0.0f ? v : 0.0f);
  }
}
// Mixed precision's casts: From → To, widening exactly or rounding to nearest even.
template <typename From, typename To>
__global__ void cast_kernel(const From* x, To* y, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) store_f32(y, i, load_f32(x, i));
}
__global__ void axpby_kernel(float alpha, const float* x, float beta, float* y, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) y[i] = alpha * x[i] + beta * y[i];
}
__global__ void axpy_kernel(float alpha, const float* x, float* y, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) y[i] += alpha * x[i];
}
__global__ void scale_kernel(float* x, float alpha, int64_t n) {
  DTRAIN_GRID_STRIDE(i, n) x[i] *= alpha;
}

__global__ void dc_diagonal_kernel(float* g, const float* d, int64_t n, float lambda) {
  DTRAIN_GRID_STRIDE(i, n) g[i] += lambda * g[i] * g[i] * d[i];
}

// Dot product in two passes with a grid of fixed size: each of kDotBlocks × kThreads threads
// sums a fixed stride of the elements, each block reduces its threads in a fixed tree, and one
// block reduces the blocks' sums in the same tree. The order depends on n alone.
__device__ void block_sum(double* shared) {
  for (int s = kThreads / 2; s > 0; s /= 2) {
    __syncthreads();
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
  }
  __syncthreads();
}
__global__ void dot_partial_kernel(const float* a, const float* b, int64_t n, double* partial) {
  __shared__ double shared[kThreads];
  double sum = 0;
  DTRAIN_GRID_STRIDE(i, n) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  shared[threadIdx.x] = sum;
  block_sum(shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}
__global__ void dot_final_kernel(double* partial, int blocks) {
  __shared__ double shared[kThreads];
  double sum = 0;
  for (int i = threadIdx.x; i < blocks; i += kThreads) sum += partial[i];
  shared[threadIdx.x] = sum;
  block_sum(shared);
  if (threadIdx.x == 0) partial[blocks] = shared[0];
}

}  // namespace

void fill_f32(float* x, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, value);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void add_f32(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, out, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void add_bf16(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n), kThreads, 0, stream>>>(as_bf16(a), as_bf16(b), as_bf16(out), n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void add_relu_bf16(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n,
                   cudaStream_t stream) {
  if (n <= 0) return;
  add_relu_kernel<<<grid_for(n), kThreads, 0, stream>>>(as_bf16(a), as_bf16(b), as_bf16(out), n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  cast_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, as_bf16(y), n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  cast_kernel<<<grid_for(n), kThreads, 0, stream>>>(as_bf16(x), y, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void add_relu_f32(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_relu_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, out, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void axpby_f32(float alpha, const float* x, float beta, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  axpby_kernel<<<grid_for(n), kThreads, 0, stream>>>(alpha, x, beta, y, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void axpy_f32(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  axpy_kernel<<<grid_for(n), kThreads, 0, stream>>>(alpha, x, y, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void scale_f32(float* x, float alpha, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, alpha, n);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void dc_diagonal_f32(float* g, const float* delta, int64_t n, float lambda, cudaStream_t stream) {
  if (n <= 0) return;
  dc_diagonal_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, delta, n, lambda);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

double dot_f32(const float* a, const float* b, int64_t n, double* scratch, cudaStream_t stream) {
  dot_partial_kernel<<<kDotBlocks, kThreads, 0, stream>>>(a, b, n, scratch);
  DTRAIN_CUDA_CHECK_LAUNCH();
  dot_final_kernel<<<1, kThreads, 0, stream>>>(scratch, kDotBlocks);
  DTRAIN_CUDA_CHECK_LAUNCH();
  double result = 0;
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(&result, scratch + kDotBlocks, sizeof(double),
                                    cudaMemcpyDeviceToHost, stream));
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

}  // namespace dtrain::cuda
