// Linear on oneDNN inner-product primitives (forward, backward-data, backward-weights with the
// bias gradient fused). Plain [N, F] activations and [out, in] weights, so no reorders: at the
// batch sizes of data-parallel training these are GEMM-bound and oneDNN's GEMM kernels win.
// A fused ReLU is a post-op of the forward; the backward passes read the gradient masked into
// a scratch tensor.
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/relu_mask.h"  // relu_mask
#include "core/error.h"

namespace dtrain::cpu {
namespace {

using namespace dnnl;

class CpuLinear final : public LinearOp {
 public:
  CpuLinear(DnnlContext& ctx, const LinearSpec& s) : ctx_(ctx), spec_(s) {
    auto src = plain_desc({s.batch, s.in_features});
    auto wei = plain_desc({s.out_features, s.in_features});
    auto bia = plain_desc({s.out_features});
    auto dst = plain_desc({s.batch, s.out_features});
    auto no_bias = memory::desc();
    primitive_attr attr;
    if (s.relu) {
      post_ops ops;
      ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
      masked_ = Tensor::empty({s.batch, s.out_features});
    }
    auto fwd_pd = inner_product_forward::primitive_desc(
        {prop_kind::forward_training, src, wei, s.bias ? bia : no_bias, dst}, attr, ctx.engine);
    auto bwd_data_pd =
        inner_product_backward_data::primitive_desc({src, wei, dst}, ctx.engine, fwd_pd);
    auto bwd_w_pd = inner_product_backward_weights::primitive_desc(
        {src, wei, s.bias ? bia : no_bias, dst}, ctx.engine, fwd_pd);
    DTRAIN_CHECK(fwd_pd.weights_desc() == wei && bwd_w_pd.diff_weights_desc() == wei)
        << "oneDNN chose a blocked weight layout for a plain inner product";
    fwd_ = inner_product_forward(fwd_pd);
    bwd_data_ = inner_product_backward_data(bwd_data_pd);
    bwd_weights_ = inner_product_backward_weights(bwd_w_pd);
    auto mk = [&](const memory::desc& d) { return memory(d, ctx.engine, DNNL_MEMORY_NONE); };
    src_ = mk(src), wei_ = mk(wei), bia_ = mk(bia), dst_ = mk(dst);
    // The backward passes get memories of their own: their arguments differ from the forward's.
    dsrc_ = mk(src), dwei_ = mk(wei), dbia_ = mk(bia), ddst_ = mk(dst);
    fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, wei_}, {DNNL_ARG_DST, dst_}};
    bd_args_ = {{DNNL_ARG_DIFF_DST, ddst_}, {DNNL_ARG_WEIGHTS, wei_}, {DNNL_ARG_DIFF_SRC, dsrc_}};
    bw_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DIFF_DST, ddst_}, {DNNL_ARG_DIFF_WEIGHTS, dwei_}};
    if (s.bias) {
      fwd_args_.emplace(DNNL_ARG_BIAS, bia_);
      bw_args_.emplace(DNNL_ARG_DIFF_BIAS, dbia_);
    }
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    check(x, spec_.batch * spec_.in_features, "x");
    check(y, spec_.batch * spec_.out_features, "y");
    src_.set_data_handle(x.raw());
    wei_.set_data_handle(w.raw());
    dst_.set_data_handle(y.raw());
    if (spec_.bias) bia_.set_data_handle(b.raw());
    fwd_.execute(ctx_.stream, fwd_args_);
  }

  void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                     const Tensor& dx) override {
    check(dx, spec_.batch * spec_.in_features, "dx");
    ddst_.set_data_handle(masked(y, dy).raw());
    wei_.set_data_handle(w.raw());
    dsrc_.set_data_handle(dx.raw());
    bwd_data_.execute(ctx_.stream, bd_args_);
  }

  void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dw,
                        const Tensor& db) override {
    check(x, spec_.batch * spec_.in_features, "x");
    src_.set_data_handle(x.raw());
    ddst_.set_data_handle(masked(y, dy).raw());
    dwei_.set_data_handle(dw.raw());
    if (spec_.bias) dbia_.set_data_handle(db.raw());
    bwd_weights_.execute(ctx_.stream, bw_args_);
  }

 private:
  static void check(const Tensor& t, int64_t numel, const char* what) {
    DTRAIN_CHECK(t.numel() == numel) << "linear " << what << ": " << t.shape().str() << " has "
                                     << t.numel() << " elements, expected " << numel;
  }

  // dy as the primitives must see it: masked by the fused ReLU's output.
  const Tensor& masked(const Tensor& y, const Tensor& dy) {
    check(dy, spec_.batch * spec_.out_features, "dy");
    if (!spec_.relu) return dy;
    check(y, spec_.batch * spec_.out_features, "y");
    relu_mask(y.data<float>(), dy.data<float>(), masked_.data<float>(), dy.numel());
    return masked_;
  }

  DnnlContext& ctx_;
  LinearSpec spec_;
  inner_product_forward fwd_;
  inner_product_backward_data bwd_data_;
  inner_product_backward_weights bwd_weights_;
  memory src_, wei_, bia_, dst_, dsrc_, dwei_, dbia_, ddst_;
  DnnlArgs fwd_args_, bd_args_, bw_args_;
  Tensor masked_;  // the masked gradient (fused ReLU)
};

}  // namespace

std::unique_ptr<LinearOp> make_linear(DnnlContext& ctx, const LinearSpec& spec) {
  return std::make_unique<CpuLinear>(ctx, spec);
}

}  // namespace dtrain::cpu
