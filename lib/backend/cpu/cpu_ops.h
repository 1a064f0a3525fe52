// Constructors of the CPU op implementations (one file each), used by CpuBackend.
#pragma once
#include <memory>

#include "backend/cpu/dnnl_context.h"  // DnnlContext
#include "backend/ops.h"               // op interfaces and specs

namespace dtrain::cpu {

// Which implementation a convolution's passes use: chosen per pass by shape (automatic), or
// forced, so that the tests cover both.
enum class ConvPath { automatic, dnnl, direct };

std::unique_ptr<LinearOp> make_linear(DnnlContext& ctx, const LinearSpec& spec);
std::unique_ptr<ConvOp> make_conv(DnnlContext& ctx, const ConvSpec& spec,
                                  ConvPath path = ConvPath::automatic);
std::unique_ptr<PoolOp> make_pool(DnnlContext& ctx, const PoolSpec& spec);
std::unique_ptr<ReluOp> make_relu(DnnlContext& ctx, const Shape& shape, DType dtype);
std::unique_ptr<GeluOp> make_gelu(DnnlContext& ctx, const GeluSpec& spec, const int& threads);
std::unique_ptr<LrnOp> make_lrn(DnnlContext& ctx, const LrnSpec& spec);
std::unique_ptr<BatchNormOp> make_batchnorm(DnnlContext& ctx, const BatchNormSpec& spec);
std::unique_ptr<SoftmaxXentOp> make_softmax_xent(const SoftmaxXentSpec& spec);
std::unique_ptr<DropoutOp> make_dropout(const DropoutSpec& spec);
std::unique_ptr<EmbeddingOp> make_embedding(const EmbeddingSpec& spec);
std::unique_ptr<LayerNormOp> make_layer_norm(const LayerNormSpec& spec);
std::unique_ptr<AttentionOp> make_attention(const AttentionSpec& spec);

}  // namespace dtrain::cpu
