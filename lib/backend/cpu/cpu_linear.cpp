// Linear on oneDNN inner-product primitives (forward, backward-data, backward-weights with the
// bias gradient fused). Plain [N, F] activations and [out, in] weights, so no reorders: at the
// batch sizes of data-parallel training these are GEMM-bound and oneDNN's GEMM kernels win.
// A fused ReLU is a post-op of the forward; the backward passes read the gradient masked into
// a scratch tensor.
// In bf16 (spec.dtype), two ways (bf16_widened.h; DTRAIN_BF16_PRODUCTS forces one). Where
// oneDNN runs on AMX tiles, oneDNN's bf16 inner products: bf16 activations and gradients,
// products accumulating in f32; the forward and the data gradient read the f32 master weights
// converted by a reorder into a bf16 copy of the op's, on every call (the caller may bind other
// weights between calls); the weight gradient reads bf16 x and dy and writes f32 dw and db
// directly. Elsewhere (AVX512-BF16 without AMX, whose bf16 GEMM runs at about half the f32
// one) the op is this f32 one on operands widened to f32 in chunks of rows, its weights
// rounded to bf16 values and its outputs rounded once to bf16; its backward passes then read
// dy masked by the widening (masked_dy).
#include "backend/cpu/bf16.h"          // bf16_t
#include "backend/cpu/bf16_widened.h"  // widen_linear: bf16 on the f32 kernels
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/relu_mask.h"  // relu_mask
#include "core/error.h"

namespace dtrain::cpu {
namespace {

using namespace dnnl;

class CpuLinear final : public LinearOp {
 public:
  // `masked_dy`: the backward passes take dy masked by the fused ReLU already, and no y (the
  // f32 op under a widened bf16 one, which masks dy while widening it).
  CpuLinear(DnnlContext& ctx, const LinearSpec& s, bool masked_dy = false)
      : ctx_(ctx), spec_(s), mask_dy_(s.relu && !masked_dy) {
    DTRAIN_CHECK(s.dtype == DType::f32 || s.dtype == DType::bf16)
        << "linear: no " << dtype_name(s.dtype) << " activations";
    const memory::data_type act = dnnl_data_type(s.dtype);
    auto src = plain_desc({s.batch, s.in_features}, act);
    auto dst = plain_desc({s.batch, s.out_features}, act);
    // The master weights, their gradient and the bias are f32 in any precision; the products
    // read the weights in the activations' type, plain [out, in]: oneDNN's bf16 GEMM reads them
    // as they are. Letting oneDNN choose (its brgemm kernels' blocked layout) measured no faster
    // (512 → 512 at batch 512, one thread: 3.3 ms per pass either way), and its reorder from
    // the f32 master weights costs 6× the plain one's.
    auto wei = plain_desc({s.out_features, s.in_features});
    auto wei_act = plain_desc({s.out_features, s.in_features}, act);
    auto bia = plain_desc({s.out_features});
    auto no_bias = memory::desc();
    primitive_attr attr = user_scratchpad();
    if (s.relu) {
      post_ops ops;
      ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    if (mask_dy_) masked_ = Tensor::empty({s.batch, s.out_features}, s.dtype);
    try {
      auto fwd_pd = inner_product_forward::primitive_desc(
          {prop_kind::forward_training, src, wei_act, s.bias ? bia : no_bias, dst}, attr,
          ctx.engine);
      auto bwd_data_pd = inner_product_backward_data::primitive_desc(
          {src, wei_act, dst}, user_scratchpad(), ctx.engine, fwd_pd);
      auto bwd_w_pd = inner_product_backward_weights::primitive_desc(
          {src, wei, s.bias ? bia : no_bias, dst}, user_scratchpad(), ctx.engine, fwd_pd);
      DTRAIN_CHECK(fwd_pd.weights_desc() == wei_act && bwd_data_pd.weights_desc() == wei_act &&
                   bwd_w_pd.diff_weights_desc() == wei)
          << "oneDNN chose a blocked weight layout for a plain inner product";
      DTRAIN_CHECK(!s.bias || bwd_w_pd.diff_bias_desc() == bia)
          << "oneDNN's inner product would not write an f32 bias gradient";
      fwd_pad_desc_ = fwd_pd.scratchpad_desc();
      bd_pad_desc_ = bwd_data_pd.scratchpad_desc();
      bw_pad_desc_ = bwd_w_pd.scratchpad_desc();
      fwd_ = inner_product_forward(fwd_pd);
      bwd_data_ = inner_product_backward_data(bwd_data_pd);
      bwd_weights_ = inner_product_backward_weights(bwd_w_pd);
    } catch (const dnnl::error& e) {
      DTRAIN_CHECK(false) << "linear " << s.in_features << " → " << s.out_features << " in "
                          << dtype_name(s.dtype) << " (weight gradient in f32): oneDNN has no "
                          << "inner product for it on this CPU (" << e.what() << ")";
    }
    // f32: the weights as they are (no reorder); bf16: converted into the op's copy.
    wei_ = BoundArg(ctx, wei, wei_act);
    auto mk = [&](const memory::desc& d) { return memory(d, ctx.engine, DNNL_MEMORY_NONE); };
    src_ = mk(src), bia_ = mk(bia), dst_ = mk(dst);
    // The backward passes get memories of their own: their arguments differ from the forward's.
    dsrc_ = mk(src), dwei_ = mk(wei), dbia_ = mk(bia), ddst_ = mk(dst);
    fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, wei_.internal()}, {DNNL_ARG_DST, dst_}};
    bd_args_ = {{DNNL_ARG_DIFF_DST, ddst_},
                {DNNL_ARG_WEIGHTS, wei_.internal()},
                {DNNL_ARG_DIFF_SRC, dsrc_}};
    bw_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DIFF_DST, ddst_}, {DNNL_ARG_DIFF_WEIGHTS, dwei_}};
    if (s.bias) {
      fwd_args_.emplace(DNNL_ARG_BIAS, bia_);
      bw_args_.emplace(DNNL_ARG_DIFF_BIAS, dbia_);
    }
    fwd_pad_ = ScratchpadArg(ctx, fwd_pad_desc_, fwd_args_);
    bd_pad_ = ScratchpadArg(ctx, bd_pad_desc_, bd_args_);
    bw_pad_ = ScratchpadArg(ctx, bw_pad_desc_, bw_args_);
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    check(x, spec_.batch * spec_.in_features, "x");
    check(y, spec_.batch * spec_.out_features, "y");
    src_.set_data_handle(x.raw());
    wei_.input(w);
    dst_.set_data_handle(y.raw());
    if (spec_.bias) bia_.set_data_handle(b.raw());
    fwd_pad_.bind();
    fwd_.execute(ctx_.stream, fwd_args_);
  }

  void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                     const Tensor& dx) override {
    check(dx, spec_.batch * spec_.in_features, "dx");
    ddst_.set_data_handle(masked(y, dy).raw());
    wei_.input(w);
    dsrc_.set_data_handle(dx.raw());
    bd_pad_.bind();
    bwd_data_.execute(ctx_.stream, bd_args_);
  }

  void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dw,
                        const Tensor& db) override {
    check(x, spec_.batch * spec_.in_features, "x");
    src_.set_data_handle(x.raw());
    ddst_.set_data_handle(masked(y, dy).raw());
    dwei_.set_data_handle(dw.raw());
    if (spec_.bias) dbia_.set_data_handle(db.raw());
    bw_pad_.bind();
    bwd_weights_.execute(ctx_.stream, bw_args_);
  }

 private:
  // An activation or its gradient: `numel` elements of the spec's dtype.
  void check(const Tensor& t, int64_t numel, const char* what) const {
    DTRAIN_CHECK(t.numel() == numel && t.dtype() == spec_.dtype)
        << "linear " << what << ": " << t.shape().str() << " " << dtype_name(t.dtype()) << " has "
        << t.numel() << " elements, expected " << numel << " " << dtype_name(spec_.dtype);
  }

  // dy as the primitives must see it: masked by the fused ReLU's output.
  const Tensor& masked(const Tensor& y, const Tensor& dy) {
    check(dy, spec_.batch * spec_.out_features, "dy");
    if (!mask_dy_) return dy;
    check(y, spec_.batch * spec_.out_features, "y");
    if (spec_.dtype == DType::bf16)
      relu_mask(y.data<bf16_t>(), dy.data<bf16_t>(), masked_.data<bf16_t>(), dy.numel());
    else
      relu_mask(y.data<float>(), dy.data<float>(), masked_.data<float>(), dy.numel());
    return masked_;
  }

  DnnlContext& ctx_;
  LinearSpec spec_;
  bool mask_dy_;  // the backward passes mask dy by the fused ReLU's output
  inner_product_forward fwd_;
  inner_product_backward_data bwd_data_;
  inner_product_backward_weights bwd_weights_;
  BoundArg wei_;  // the weights the products read (bf16: the op's converted copy)
  memory src_, bia_, dst_, dsrc_, dwei_, dbia_, ddst_;
  DnnlArgs fwd_args_, bd_args_, bw_args_;
  memory::desc fwd_pad_desc_, bd_pad_desc_, bw_pad_desc_;
  ScratchpadArg fwd_pad_, bd_pad_, bw_pad_;  // from the context's shared scratchpad
  Tensor masked_;                            // the masked gradient (fused ReLU)
};

}  // namespace

std::unique_ptr<LinearOp> make_linear(DnnlContext& ctx, const LinearSpec& spec) {
  if (spec.dtype != DType::bf16 || bf16_products() == Bf16Products::native)
    return std::make_unique<CpuLinear>(ctx, spec);
  LinearSpec f32 = spec;
  f32.dtype = DType::f32;
  const WidenedShape shape{"linear",
                           spec.batch,
                           spec.in_features,
                           spec.out_features,
                           Shape{spec.out_features, spec.in_features},
                           spec.bias ? spec.out_features : 0,
                           spec.relu};
  return widen_linear(ctx, shape, [&ctx, f32](int64_t batch) {
    LinearSpec chunk = f32;
    chunk.batch = batch;
    return std::make_unique<CpuLinear>(ctx, chunk, /*masked_dy=*/true);
  });
}

}  // namespace dtrain::cpu
