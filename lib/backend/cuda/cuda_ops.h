// Constructors of the CUDA op implementations (one file each), used by CudaBackend. Every op
// enqueues on the context's stream; plans (descriptors, chosen algorithms, workspace needs) are
// made here, once per shape.
#pragma once
#include <memory>

#include "backend/cuda/cuda_context.h"  // CudaContext
#include "backend/ops.h"                // op interfaces and specs

namespace dtrain::cuda {

std::unique_ptr<LinearOp> make_linear(CudaContext& ctx, const LinearSpec& spec);  // cuBLAS
std::unique_ptr<ConvOp> make_conv(CudaContext& ctx, const ConvSpec& spec);        // cuDNN
std::unique_ptr<PoolOp> make_pool(CudaContext& ctx, const PoolSpec& spec);        // cuDNN
std::unique_ptr<LrnOp> make_lrn(CudaContext& ctx, const LrnSpec& spec);           // cuDNN
std::unique_ptr<BatchNormOp> make_batchnorm(CudaContext& ctx, const BatchNormSpec& spec);
std::unique_ptr<ReluOp> make_relu(CudaContext& ctx, const Shape& shape, DType dtype);  // own
std::unique_ptr<GeluOp> make_gelu(CudaContext& ctx, const GeluSpec& spec);             // own
std::unique_ptr<SoftmaxXentOp> make_softmax_xent(CudaContext& ctx, const SoftmaxXentSpec& spec);
std::unique_ptr<DropoutOp> make_dropout(CudaContext& ctx, const Shape& shape, DType dtype);
std::unique_ptr<EmbeddingOp> make_embedding(CudaContext& ctx, const EmbeddingSpec& spec);   // own
std::unique_ptr<LayerNormOp> make_layer_norm(CudaContext& ctx, const LayerNormSpec& spec);  // own
std::unique_ptr<AttentionOp> make_attention(CudaContext& ctx, const AttentionSpec& spec);   // own

// Checks that `t` is an f32 tensor on the CUDA device with at least `numel` elements.
void check_device_f32(const Tensor& t, int64_t numel, const char* what);
// Checks that `t` is a `dtype` tensor on the CUDA device with at least `numel` elements.
void check_device(const Tensor& t, DType dtype, int64_t numel, const char* what);
// Checks that an op's activations' dtype is f32 or bf16 (what mixed precision runs).
void check_activation_dtype(DType dtype, const char* what);

}  // namespace dtrain::cuda
