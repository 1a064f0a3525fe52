// Linear on oneDNN inner-product primitives (forward, backward-data, backward-weights with the
// bias gradient fused). Plain [N, F] activations and [out, in] weights, so no reorders: at the
// batch sizes of data-parallel training these are GEMM-bound and oneDNN's GEMM kernels win.
#include "backend/cpu/cpu_ops.h"
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
    auto fwd_pd = inner_product_forward::primitive_desc(
        {prop_kind::forward_training, src, wei, s.bias ? bia : no_bias, dst}, ctx.engine);
    auto bwd_data_pd =
        inner_product_backward_data::primitive_desc({src, wei, dst}, ctx.engine, fwd_pd);
    auto bwd_w_pd = inner_product_backward_weights::primitive_desc(
        {src, wei, s.bias ? bia : no_bias, dst}, ctx.engine, fwd_pd);
    DTRAIN_CHECK(fwd_pd.weights_desc() == wei && bwd_w_pd.diff_weights_desc() == wei)
        << "oneDNN chose a blocked weight layout for a plain inner product";
    fwd_ = inner_product_forward(fwd_pd);
    bwd_data_ = inner_product_backward_data(bwd_data_pd);
    bwd_weights_ = inner_product_backward_weights(bwd_w_pd);
    src_ = memory(src, ctx.engine, DNNL_MEMORY_NONE);
    wei_ = memory(wei, ctx.engine, DNNL_MEMORY_NONE);
    bia_ = memory(bia, ctx.engine, DNNL_MEMORY_NONE);
    dst_ = memory(dst, ctx.engine, DNNL_MEMORY_NONE);
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    check(x, spec_.batch * spec_.in_features, "x");
    check(y, spec_.batch * spec_.out_features, "y");
    src_.set_data_handle(x.raw());
    wei_.set_data_handle(w.raw());
    dst_.set_data_handle(y.raw());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, wei_}, {DNNL_ARG_DST, dst_}};
    if (spec_.bias) {
      bia_.set_data_handle(b.raw());
      args.emplace(DNNL_ARG_BIAS, bia_);
    }
    fwd_.execute(ctx_.stream, args);
  }

  void backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) override {
    check(dx, spec_.batch * spec_.in_features, "dx");
    dst_.set_data_handle(dy.raw());
    wei_.set_data_handle(w.raw());
    src_.set_data_handle(dx.raw());
    bwd_data_.execute(
        ctx_.stream,
        {{DNNL_ARG_DIFF_DST, dst_}, {DNNL_ARG_WEIGHTS, wei_}, {DNNL_ARG_DIFF_SRC, src_}});
  }

  void backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw,
                        const Tensor& db) override {
    check(dy, spec_.batch * spec_.out_features, "dy");
    src_.set_data_handle(x.raw());
    dst_.set_data_handle(dy.raw());
    wei_.set_data_handle(dw.raw());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src_}, {DNNL_ARG_DIFF_DST, dst_}, {DNNL_ARG_DIFF_WEIGHTS, wei_}};
    if (spec_.bias) {
      bia_.set_data_handle(db.raw());
      args.emplace(DNNL_ARG_DIFF_BIAS, bia_);
    }
    bwd_weights_.execute(ctx_.stream, args);
  }

 private:
  static void check(const Tensor& t, int64_t numel, const char* what) {
    DTRAIN_CHECK(t.numel() == numel) << "linear " << what << ": " << t.shape().str() << " has "
                                     << t.numel() << " elements, expected " << numel;
  }

  DnnlContext& ctx_;
  LinearSpec spec_;
  inner_product_forward fwd_;
  inner_product_backward_data bwd_data_;
  inner_product_backward_weights bwd_weights_;
  memory src_, wei_, bia_, dst_;
};

}  // namespace

std::unique_ptr<LinearOp> make_linear(DnnlContext& ctx, const LinearSpec& spec) {
  return std::make_unique<CpuLinear>(ctx, spec);
}

}  // namespace dtrain::cpu
