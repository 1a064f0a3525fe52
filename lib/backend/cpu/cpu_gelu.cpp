// GELU on oneDNN eltwise primitives: gelu_erf and gelu_tanh are PyTorch's exact and tanh forms,
// forward and backward (which reads the input).
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace dtrain::cpu {
namespace {

using namespace dnnl;

class CpuGelu final : public GeluOp {
 public:
  CpuGelu(DnnlContext& ctx, const GeluSpec& spec) : ctx_(ctx), numel_(spec.shape.numel()) {
    const algorithm alg = spec.approximate == GeluApproximation::tanh ? algorithm::eltwise_gelu_tanh
                                                                      : algorithm::eltwise_gelu_erf;
    // Element-wise: the shape does not matter, only the count; 1-D keeps it layout-free.
    auto md = plain_desc({numel_});
    auto fwd_pd = eltwise_forward::primitive_desc({prop_kind::forward_training, alg, md, 0.f, 0.f},
                                                  ctx.engine);
    auto bwd_pd = eltwise_backward::primitive_desc({alg, md, md, 0.f, 0.f}, ctx.engine, fwd_pd);
    fwd_ = eltwise_forward(fwd_pd);
    bwd_ = eltwise_backward(bwd_pd);
    a_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
    b_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
    c_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
    fwd_args_ = {{DNNL_ARG_SRC, a_}, {DNNL_ARG_DST, b_}};
    bwd_args_ = {{DNNL_ARG_SRC, a_}, {DNNL_ARG_DIFF_DST, b_}, {DNNL_ARG_DIFF_SRC, c_}};
  }

  void forward(const Tensor& x, const Tensor& y) override {
    DTRAIN_CHECK(x.numel() == numel_ && y.numel() == numel_) << "gelu: size mismatch";
    a_.set_data_handle(x.raw());
    b_.set_data_handle(y.raw());
    fwd_.execute(ctx_.stream, fwd_args_);
  }

  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) override {
    DTRAIN_CHECK(x.numel() == numel_ && dy.numel() == numel_ && dx.numel() == numel_)
        << "gelu: size mismatch";
    a_.set_data_handle(x.raw());
    b_.set_data_handle(dy.raw());
    c_.set_data_handle(dx.raw());
    bwd_.execute(ctx_.stream, bwd_args_);
  }

 private:
  DnnlContext& ctx_;
  int64_t numel_;
  eltwise_forward fwd_;
  eltwise_backward bwd_;
  memory a_, b_, c_;
  DnnlArgs fwd_args_, bwd_args_;
};

}  // namespace

std::unique_ptr<GeluOp> make_gelu(DnnlContext& ctx, const GeluSpec& spec) {
  return std::make_unique<CpuGelu>(ctx, spec);
}

}  // namespace dtrain::cpu
