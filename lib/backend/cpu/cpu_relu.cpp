// ReLU on oneDNN eltwise primitives; the backward reads the output (use_dst_for_bwd), so the
// input activation need not be kept and the forward may run in place. In bf16 the primitives
// read and write bf16 directly: max(x, 0) and the masked gradient are exact in any dtype.
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"  // DTRAIN_CHECK

namespace dtrain::cpu {
namespace {

class CpuRelu final : public ReluOp {
 public:
  CpuRelu(DnnlContext& ctx, const Shape& shape)
      : eltwise_(ctx, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, true, shape.numel(), "relu") {}
  void forward(const Tensor& x, const Tensor& y) override { eltwise_.forward(x, y); }
  void backward(const Tensor&, const Tensor& y, const Tensor& dy, const Tensor& dx) override {
    eltwise_.backward(y, dy, dx);
  }

 private:
  DnnlEltwise eltwise_;
};

// The bf16 ReLU: the same primitives over bf16 memories of `numel` elements (1-D: only the count
// matters).
class CpuReluBf16 final : public ReluOp {
 public:
  CpuReluBf16(DnnlContext& ctx, const Shape& shape) : ctx_(ctx), numel_(shape.numel()) {
    using namespace dnnl;
    const memory::desc md({numel_}, memory::data_type::bf16, dnnl_tag::a);
    const auto algorithm = algorithm::eltwise_relu_use_dst_for_bwd;
    auto fwd_pd = eltwise_forward::primitive_desc(
        {prop_kind::forward_training, algorithm, md, 0.f, 0.f}, ctx.engine);
    auto bwd_pd =
        eltwise_backward::primitive_desc({algorithm, md, md, 0.f, 0.f}, ctx.engine, fwd_pd);
    fwd_ = eltwise_forward(fwd_pd);
    bwd_ = eltwise_backward(bwd_pd);
    a_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
    b_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
    c_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
    fwd_args_ = {{DNNL_ARG_SRC, a_}, {DNNL_ARG_DST, b_}};
    bwd_args_ = {{DNNL_ARG_DST, a_}, {DNNL_ARG_DIFF_DST, b_}, {DNNL_ARG_DIFF_SRC, c_}};
  }
  void forward(const Tensor& x, const Tensor& y) override {
    check(x, "x"), check(y, "y");
    a_.set_data_handle(x.raw());
    b_.set_data_handle(y.raw());
    fwd_.execute(ctx_.stream, fwd_args_);
  }
  void backward(const Tensor&, const Tensor& y, const Tensor& dy, const Tensor& dx) override {
    check(y, "y"), check(dy, "dy"), check(dx, "dx");
    a_.set_data_handle(y.raw());
    b_.set_data_handle(dy.raw());
    c_.set_data_handle(dx.raw());
    bwd_.execute(ctx_.stream, bwd_args_);
  }

 private:
  void check(const Tensor& t, const char* what) const {
    DTRAIN_CHECK(t.dtype() == DType::bf16 && t.numel() == numel_)
        << "relu (bf16): " << what << " is " << dtype_name(t.dtype()) << " " << t.shape().str()
        << ", expected " << numel_ << " bf16 elements";
  }

  DnnlContext& ctx_;
  int64_t numel_;
  dnnl::eltwise_forward fwd_;
  dnnl::eltwise_backward bwd_;
  dnnl::memory a_, b_, c_;
  DnnlArgs fwd_args_, bwd_args_;
};

}  // namespace

std::unique_ptr<ReluOp> make_relu(DnnlContext& ctx, const Shape& shape, DType dtype) {
  DTRAIN_CHECK(dtype == DType::f32 || dtype == DType::bf16)
      << "relu: no " << dtype_name(dtype) << " kernels";
  if (dtype == DType::bf16) return std::make_unique<CpuReluBf16>(ctx, shape);
  return std::make_unique<CpuRelu>(ctx, shape);
}

}  // namespace dtrain::cpu
