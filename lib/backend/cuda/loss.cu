// Softmax cross-entropy and dropout kernels (cpu_softmax_xent.cpp and cpu_dropout.cpp are the
// reference). Dropout draws from the same counter-based hash as the CPU (core/rng.h), so both
// backends keep exactly the same elements.
#include <cfloat>  // FLT_MAX

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "core/rng.h"  // random_uniform (constexpr: usable in device code)

namespace dtrain::cuda {
namespace {

constexpr int kRowThreads = 128;  // one block per row; a 1000-class row is 8 values per thread

// Largest value and its first index over the block (ties → lowest index, as the CPU's scan).
__device__ void block_argmax(float& value, int& index) {
  __shared__ float values[kRowThreads / 32];
  __shared__ int indices[kRowThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    const float v = __shfl_down_sync(0xffffffffu, value, offset);
    const int j = __shfl_down_sync(0xffffffffu, index, offset);
    if (v > value || (v == value && j < index)) value = v, index = j;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) values[warp] = value, indices[warp] = index;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kRowThreads / 32; ++w)
      if (values[w] > value || (values[w] == value && indices[w] < index))
        value = values[w], index = indices[w];
    values[0] = value, indices[0] = index;
  }
  __syncthreads();
  value = values[0], index = indices[0];
  __syncthreads();
}

__device__ float block_sum(float value) {
  __shared__ float partial[kRowThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0;
    for (int w = 0; w < kRowThreads / 32; ++w) total += partial[w];
    partial[0] = total;
  }
  __syncthreads();
  const float total = partial[0];
  __syncthreads();
  return total;
}

__global__ void softmax_xent_forward_kernel(const float* logits, const int32_t* labels,
                                            float* probs, float* stats, int64_t classes) {
  const int64_t row = blockIdx.x;
  const float* z = logits + row * classes;
  float* p = probs + row * classes;
  float max = -FLT_MAX;
  int argmax = static_cast<int>(classes);
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    if (z[j] > max || argmax == classes) max = z[j], argmax = static_cast<int>(j);
  block_argmax(max, argmax);
  float local = 0;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    const float e = expf(z[j] - max);
    p[j] = e;
    local += e;
  }
  const float sum = block_sum(local);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) p[j] *= inv;
  if (threadIdx.x == 0) {
    const int32_t label = labels[row];
    if (label < 0 || label >= classes) {
      atomicAdd(&stats[0], __int_as_float(0x7fc00000));  // NaN: the trainer reports divergence
      return;
    }
    atomicAdd(&stats[0], logf(sum) - (z[label] - max));
    if (argmax == label) atomicAdd(&stats[1], 1.0f);
  }
}

__global__ void softmax_xent_backward_kernel(const float* probs, const int32_t* labels,
                                             float* dlogits, int64_t n, int64_t classes,
                                             float scale) {
  DTRAIN_GRID_STRIDE(i, n) {
    const int64_t row = i / classes, j = i % classes;
    float d = probs[i] * scale;
    if (labels[row] == j) d -= scale;
    dlogits[i] = d;
  }
}

__global__ void dropout_forward_kernel(const float* x, float* y, uint8_t* mask, int64_t n, float p,
                                       float keep_scale, uint64_t seed, uint64_t rng_stream) {
  DTRAIN_GRID_STRIDE(i, n) {
    const bool keep = random_uniform(seed, rng_stream, static_cast<uint64_t>(i)) >= p;
    mask[i] = keep;
    y[i] = keep ? x[i] * keep_scale : 0.0f;
  }
}

__global__ void dropout_backward_kernel(const float* dy, const uint8_t* mask, float* dx, int64_t n,
                                        float keep_scale) {
  DTRAIN_GRID_STRIDE(i, n) dx[i] = mask[i] ? dy[i] * keep_scale : 0.0f;
}

}  // namespace

void softmax_xent_forward(const float* logits, const int32_t* labels, float* probs, float* stats,
                          int64_t batch, int64_t classes, cudaStream_t stream) {
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(stats, 0, 2 * sizeof(float), stream));
  if (batch <= 0) return;
  softmax_xent_forward_kernel<<<static_cast<unsigned>(batch), kRowThreads, 0, stream>>>(
      logits, labels, probs, stats, classes);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void softmax_xent_backward(const float* probs, const int32_t* labels, float* dlogits, int64_t batch,
                           int64_t classes, float scale, cudaStream_t stream) {
  const int64_t n = batch * classes;
  if (n <= 0) return;
  softmax_xent_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(probs, labels, dlogits, n,
                                                                     classes, scale);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, float p, uint64_t seed,
                     uint64_t rng_stream, cudaStream_t stream) {
  if (n <= 0) return;
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  dropout_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, mask, n, p, keep_scale, seed,
                                                               rng_stream);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t n, float p,
                      cudaStream_t stream) {
  if (n <= 0) return;
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  dropout_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, mask, dx, n, keep_scale);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace dtrain::cuda
