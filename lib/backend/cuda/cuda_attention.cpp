// Causal multi-head attention on its own flash-attention kernels (attention.cu). The backward's
// scratch is the caller's workspace: one float per (sample, head, position). qkv, y, dy and
// dqkv are AttentionSpec::dtype (f32 or bf16); lse and the workspace are f32 either way.
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/sequence_kernels.h"
#include "core/error.h"

namespace dtrain::cuda {
namespace {

class CudaAttention final : public AttentionOp {
 public:
  CudaAttention(CudaContext& ctx, const AttentionSpec& spec) : ctx_(ctx), spec_(spec) {
    DTRAIN_CHECK(spec.batch > 0 && spec.seq > 0 && spec.heads > 0 && spec.head_dim > 0)
        << "attention: batch " << spec.batch << ", sequence " << spec.seq << ", " << spec.heads
        << " heads of dimension " << spec.head_dim;
    DTRAIN_CHECK(spec.head_dim <= kMaxAttentionHeadDim)
        << "attention: heads of dimension " << spec.head_dim << "; the CUDA kernels take up to "
        << kMaxAttentionHeadDim;
    DTRAIN_CHECK(spec.dropout >= 0.0f && spec.dropout < 1.0f)
        << "attention: dropout " << spec.dropout << " is not in [0, 1)";
    check_activation_dtype(spec.dtype, "attention");
  }
  size_t workspace_bytes() const override {
    return static_cast<size_t>(attention_backward_scratch_floats(shape(spec_.batch))) *
           sizeof(float);
  }
  void forward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& workspace,
               bool training, uint64_t seed, uint64_t stream) override {
    const AttentionShape s = shape(batch_of(qkv, "attention forward"));
    check_device(y, spec_.dtype, s.batch * s.seq * spec_.channels(), "attention forward y");
    check_device_f32(lse, s.batch * s.heads * s.seq, "attention forward lse");
    const float dropout = training ? spec_.dropout : 0.0f;
    if (bf16())
      attention_forward_bf16(qkv.data<uint16_t>(), y.data<uint16_t>(), lse.data<float>(), s,
                             dropout, seed, stream, ctx_.stream());
    else
      attention_forward_f32(qkv.data<float>(), y.data<float>(), lse.data<float>(), s, dropout, seed,
                            stream, ctx_.stream());
  }
  void backward(const Tensor& qkv, const Tensor& y, const Tensor& dy, const Tensor& lse,
                const Tensor& workspace, uint64_t seed, uint64_t stream,
                const Tensor& dqkv) override {
    const AttentionShape s = shape(batch_of(qkv, "attention backward"));
    const int64_t outputs = s.batch * s.seq * spec_.channels();
    check_device(y, spec_.dtype, outputs, "attention backward y");
    check_device(dy, spec_.dtype, outputs, "attention backward dy");
    check_device_f32(lse, s.batch * s.heads * s.seq, "attention backward lse");
    check_device(dqkv, spec_.dtype, qkv.numel(), "attention backward dqkv");
    DTRAIN_CHECK(workspace.defined() && workspace.device() == Device::cuda &&
                 workspace.bytes() >=
                     static_cast<size_t>(attention_backward_scratch_floats(s)) * sizeof(float))
        << "attention backward: the workspace holds fewer than " << workspace_bytes() << " bytes";
    float* scratch = static_cast<float*>(workspace.raw());
    if (bf16())
      attention_backward_bf16(qkv.data<uint16_t>(), y.data<uint16_t>(), dy.data<uint16_t>(),
                              lse.data<float>(), dqkv.data<uint16_t>(), scratch, s, spec_.dropout,
                              seed, stream, ctx_.stream());
    else
      attention_backward_f32(qkv.data<float>(), y.data<float>(), dy.data<float>(),
                             lse.data<float>(), dqkv.data<float>(), scratch, s, spec_.dropout, seed,
                             stream, ctx_.stream());
  }

 private:
  bool bf16() const { return spec_.dtype == DType::bf16; }
  AttentionShape shape(int64_t batch) const {
    return {batch, spec_.seq, spec_.heads, spec_.head_dim};
  }
  // The samples in qkv: at most the spec's batch (a smaller last batch).
  int64_t batch_of(const Tensor& qkv, const char* what) const {
    check_device(qkv, spec_.dtype, 0, what);
    const int64_t sample = spec_.seq * 3 * spec_.channels();
    DTRAIN_CHECK(qkv.numel() > 0 && qkv.numel() % sample == 0 &&
                 qkv.numel() / sample <= spec_.batch)
        << what << ": qkv " << qkv.shape().str() << " is not up to " << spec_.batch
        << " samples of [" << spec_.seq << ", " << 3 * spec_.channels() << "]";
    return qkv.numel() / sample;
  }

  CudaContext& ctx_;
  AttentionSpec spec_;
};

}  // namespace

std::unique_ptr<AttentionOp> make_attention(CudaContext& ctx, const AttentionSpec& spec) {
  return std::make_unique<CudaAttention>(ctx, spec);
}

}  // namespace dtrain::cuda
