// Cross-channel local response normalisation (AlexNet) on oneDNN LRN primitives, plain NCHW or
// channel-blocked.
// oneDNN's formula matches PyTorch's LocalResponseNorm: y = x / (k + α/n · Σ x²)^β.
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace dtrain::cpu {
namespace {

using namespace dnnl;

class CpuLrn final : public LrnOp {
 public:
  CpuLrn(DnnlContext& ctx, const LrnSpec& s) : ctx_(ctx) {
    auto md = activation_desc(s.shape(), s.block);
    auto fwd_pd =
        lrn_forward::primitive_desc({prop_kind::forward_training, algorithm::lrn_across_channels,
                                     md, s.size, s.alpha, s.beta, s.k},
                                    ctx.engine);
    auto bwd_pd = lrn_backward::primitive_desc(
        {algorithm::lrn_across_channels, md, md, s.size, s.alpha, s.beta, s.k}, ctx.engine, fwd_pd);
    fwd_ = lrn_forward(fwd_pd);
    bwd_ = lrn_backward(bwd_pd);
    ws_desc_ = fwd_pd.workspace_desc();
    src_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
    dst_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
    diff_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
    fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}};
    bwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DIFF_DST, dst_}, {DNNL_ARG_DIFF_SRC, diff_}};
    if (ws_desc_.get_size() > 0) {
      ws_ = memory(ws_desc_, ctx.engine, DNNL_MEMORY_NONE);
      fwd_args_.emplace(DNNL_ARG_WORKSPACE, ws_);
      bwd_args_.emplace(DNNL_ARG_WORKSPACE, ws_);
    }
  }

  size_t workspace_bytes() const override { return ws_desc_.get_size(); }

  void forward(const Tensor& x, const Tensor& y, const Tensor& workspace, bool) override {
    src_.set_data_handle(x.raw());
    dst_.set_data_handle(y.raw());
    if (workspace_bytes() > 0) {
      DTRAIN_CHECK(workspace.bytes() >= workspace_bytes()) << "LRN workspace too small";
      ws_.set_data_handle(workspace.raw());
    }
    fwd_.execute(ctx_.stream, fwd_args_);
  }

  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace,
                const Tensor& dx) override {
    src_.set_data_handle(x.raw());
    dst_.set_data_handle(dy.raw());
    diff_.set_data_handle(dx.raw());
    if (workspace_bytes() > 0) ws_.set_data_handle(workspace.raw());
    bwd_.execute(ctx_.stream, bwd_args_);
  }

 private:
  DnnlContext& ctx_;
  lrn_forward fwd_;
  lrn_backward bwd_;
  memory::desc ws_desc_;
  memory src_, dst_, diff_, ws_;
  DnnlArgs fwd_args_, bwd_args_;
};

}  // namespace

std::unique_ptr<LrnOp> make_lrn(DnnlContext& ctx, const LrnSpec& spec) {
  return std::make_unique<CpuLrn>(ctx, spec);
}

}  // namespace dtrain::cpu
