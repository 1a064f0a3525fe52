// Launchers of the own kernels that the cuDNN-based ops need next to cuDNN (norm.cu): pooling
// whose windows overhang the input (ceil mode, which cuDNN cannot size) and the batch-norm
// statistics conversions. Each enqueues on `stream` and returns at once.
#pragma once
#include <cuda_runtime_api.h>  // cudaStream_t

#include <cstdint>

namespace dtrain::cuda {

// One pooling plane's geometry (PoolSpec without the batch and channel counts).
struct PoolGeometry {
  int64_t height, width, out_height, out_width;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool include_padding;  // averages divide by the window inside the padded input
};

// Windows, divisors, tie-breaking (first maximum in scan order) and the per-plane argmax
// index (h·W + w, int32) follow cpu_pool.cpp exactly; the backward passes gather per input in
// increasing output order, so they add in the CPU's order and are deterministic.
// `argmax` may be null in the max forward (inference).
void max_pool_forward_f32(const float* x, float* y, int32_t* argmax, int64_t planes,
                          const PoolGeometry& g, cudaStream_t stream);
void max_pool_backward_f32(const float* dy, const int32_t* argmax, float* dx, int64_t planes,
                           const PoolGeometry& g, cudaStream_t stream);
void avg_pool_forward_f32(const float* x, float* y, int64_t planes, const PoolGeometry& g,
                          cudaStream_t stream);
void avg_pool_backward_f32(const float* dy, float* dx, int64_t planes, const PoolGeometry& g,
                           cudaStream_t stream);

// The same on bf16 activations (raw 16-bit patterns): compared and summed in f32, rounded once.
void max_pool_forward_bf16(const uint16_t* x, uint16_t* y, int32_t* argmax, int64_t planes,
                           const PoolGeometry& g, cudaStream_t stream);
void max_pool_backward_bf16(const uint16_t* dy, const int32_t* argmax, uint16_t* dx, int64_t planes,
                            const PoolGeometry& g, cudaStream_t stream);
void avg_pool_forward_bf16(const uint16_t* x, uint16_t* y, int64_t planes, const PoolGeometry& g,
                           cudaStream_t stream);
void avg_pool_backward_bf16(const uint16_t* dy, uint16_t* dx, int64_t planes, const PoolGeometry& g,
                            cudaStream_t stream);

// inv_std[c] = 1 / sqrt(variance[c] + epsilon): cuDNN's "saved inverse variance".
void inv_std_f32(const float* variance, float* inv_std, int64_t n, float epsilon,
                 cudaStream_t stream);

}  // namespace dtrain::cuda
