// Launchers of dtrain's own CUDA kernels (the .cu files of this folder), callable from plain
// C++: each enqueues on `stream` and returns at once. Sizes are element counts.
#pragma once
#include <cuda_runtime_api.h>  // cudaStream_t

#include <cstdint>

namespace dtrain::cuda {

// ---- element-wise (elementwise.cu) ----
void fill_f32(float* x, int64_t n, float value, cudaStream_t stream);
void add_f32(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void add_relu_f32(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void axpy_f32(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);
void axpby_f32(float alpha, const float* x, float beta, float* y, int64_t n, cudaStream_t stream);
void scale_f32(float* x, float alpha, int64_t n, cudaStream_t stream);
// bf16 activations are passed as their raw 16-bit patterns (bf16.cuh reads them as bf16).
// out = a + b (out = max(a + b, 0)) on bf16 values: the sum in f32, rounded once.
void add_bf16(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n, cudaStream_t stream);
void add_relu_bf16(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n,
                   cudaStream_t stream);
// Mixed precision's casts: round to nearest even (f32 → bf16), widen exactly (bf16 → f32).
void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream);
// Backend::dc_diagonal: g += λ·g·g·Δ.
void dc_diagonal_f32(float* g, const float* delta, int64_t n, float lambda, cudaStream_t stream);
// Backend::dot: a fixed-order sum in double; `scratch` holds kDotBlocks + 1 doubles on the
// device. Waits for the stream and returns the result.
constexpr int kDotBlocks = 256;
double dot_f32(const float* a, const float* b, int64_t n, double* scratch, cudaStream_t stream);

// ---- activations (activation.cu) ----
// y = max(x + bias[(i / inner) % channels], 0) or without ReLU, in place allowed (x == y).
// bias may be null (ReLU only). inner = H·W for NCHW, 1 for [N, F].
void bias_relu_f32(const float* x, const float* bias, float* y, int64_t n, int64_t channels,
                   int64_t inner, bool relu, cudaStream_t stream);
// dx = y > 0 ? dy : 0 (dx may alias dy).
void relu_backward_f32(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);
// ReLU on bf16 values (exact: no rounding happens), y and dx may alias x and dy.
void relu_forward_bf16(const uint16_t* x, uint16_t* y, int64_t n, cudaStream_t stream);
void relu_backward_bf16(const uint16_t* y, const uint16_t* dy, uint16_t* dx, int64_t n,
                        cudaStream_t stream);
// Dropout on bf16 values: the f32 op's mask (the draw ignores the data), each kept value scaled
// in f32 and rounded once (cpu_dropout.cpp).
void dropout_forward_bf16(const uint16_t* x, uint16_t* y, uint8_t* mask, int64_t n, float p,
                          uint64_t seed, uint64_t rng_stream, cudaStream_t stream);
void dropout_backward_bf16(const uint16_t* dy, const uint8_t* mask, uint16_t* dx, int64_t n,
                           float p, cudaStream_t stream);

// ---- GELU (gelu.cu), PyTorch's forms: `tanh` its tanh approximation, else erf ----
void gelu_forward_f32(const float* x, float* y, int64_t n, bool tanh, cudaStream_t stream);
// dx = dy·gelu'(x) (dx may alias dy).
void gelu_backward_f32(const float* x, const float* dy, float* dx, int64_t n, bool tanh,
                       cudaStream_t stream);
// The same on bf16 x, y, dy, dx: read widened, computed in f32, rounded once when stored.
void gelu_forward_bf16(const uint16_t* x, uint16_t* y, int64_t n, bool tanh, cudaStream_t stream);
void gelu_backward_bf16(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, bool tanh,
                        cudaStream_t stream);

// ---- loss and dropout (loss.cu) ----
// Row-wise softmax of [batch, classes] logits, stats[0] = Σ −log p[label], stats[1] = number of
// rows whose first largest logit is the label.
void softmax_xent_forward(const float* logits, const int32_t* labels, float* probs, float* stats,
                          int64_t batch, int64_t classes, cudaStream_t stream);
// dlogits = (probs − onehot(labels))·scale.
void softmax_xent_backward(const float* probs, const int32_t* labels, float* dlogits, int64_t batch,
                           int64_t classes, float scale, cudaStream_t stream);
void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, float p, uint64_t seed,
                     uint64_t rng_stream, cudaStream_t stream);
void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t n, float p,
                      cudaStream_t stream);

// ---- bf16 helpers of Linear and Conv2d (bf16_products.cu) ----
// bf16 values are their 16 bits (uint16_t) here, so that plain C++ can call these. Every store
// of a bf16 value rounds an f32 once to nearest even, as the CPU's f32_to_bf16.
void fill_bf16(uint16_t* x, int64_t n, float value, cudaStream_t stream);
// bias_relu_f32's epilogue on an f32 product, stored in bf16 (bias and ReLU before the one
// rounding, as oneDNN's bf16 primitives on the CPU).
void bias_relu_to_bf16(const float* x, const float* bias, uint16_t* y, int64_t n, int64_t channels,
                       int64_t inner, bool relu, cudaStream_t stream);
// The same epilogue on a bf16 x (in place allowed): widened exactly, one rounding as it stores.
void bias_relu_bf16(const uint16_t* x, const float* bias, uint16_t* y, int64_t n, int64_t channels,
                    int64_t inner, bool relu, cudaStream_t stream);
}  // namespace dtrain::cuda
