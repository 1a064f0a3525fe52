// Conv2d: per pass, either oneDNN's convolution primitives or the direct NCHW kernels
// (direct_conv.h) for the small channel counts oneDNN handles poorly. Activations outside the
// op are plain NCHW or channel-blocked as the spec says (src_block, dst_block); weights are
// OIHW. The oneDNN primitives take blocked activations as they are and are created with format
// `any` elsewhere, so oneDNN picks its fastest layouts, and BoundArg adds the reorders between
// the two once, at construction (the weights, reordered on every call: a few KB to a few MB
// against activations of MBs; and plain activations of layers outside a blocked chain); even
// LeNet's 6→16 convolution runs 2–4× faster this way than oneDNN's plain-layout (im2col + GEMM)
// path, reorders included. 3×3 stride-1 convolutions on blocks of 16 channels, with 32 or more
// of them and outputs of 4×4 or more, take oneDNN's Winograd kernels (F(4×4, 3×3)) instead of
// its direct ones: measured per layer (--profile-layers) at batch 64, Winograd is about a third
// faster on ResNet-20's 32 and 64 channels and no faster at 16, 25–40 % faster on VGG-16's
// 4×4 outputs and twice as slow forward on its 2×2 ones. DTRAIN_CONV_ALGO=direct or
// winograd forces one. A fused ReLU is a post-op of the oneDNN forward; the oneDNN backward
// passes read the gradient masked into the context's shared scratch (oneDNN 2.6 has no ReLU
// fused into a convolution's backward). The weight gradient of stride-1 convolutions on blocks of
// 16 channels with rows of 32 or more outputs is our own kernel (blocked_weight_grad.h).
// In bf16 (spec.dtype), two ways (bf16_widened.h; DTRAIN_BF16_PRODUCTS forces one). Where
// oneDNN runs on AMX tiles, every pass is oneDNN's direct bf16 convolution (its Winograd
// kernels and ours are f32 only) on bf16 activations and gradients, accumulating in f32: the
// forward and the data gradient read the f32 master weights converted to bf16 in oneDNN's
// layout by the weights' reorder, on every call as in f32, and the weight gradient is written
// in f32, through the reorder from oneDNN's blocked layout to OIHW where it chooses one.
// Elsewhere (AVX512-BF16 without AMX, whose bf16 instructions are no faster than its f32 FMAs)
// the op is this f32 one, with all its kernels, on operands widened to f32 in chunks of the
// batch, its weights rounded to bf16 values and its outputs rounded once to bf16; its backward
// passes then read dy masked by the widening (masked_dy).
#include <omp.h>  // omp_get_max_threads: the direct kernels' scratch

#include <cstdlib>  // getenv: DTRAIN_CONV_ALGO
#include <string_view>

#include "backend/cpu/bf16.h"                 // bf16_t
#include "backend/cpu/bf16_widened.h"         // widen_conv: bf16 on the f32 kernels
#include "backend/cpu/blocked_weight_grad.h"  // BlockedWeightGrad
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/direct_conv.h"  // DirectConv
#include "backend/cpu/relu_mask.h"    // relu_mask
#include "core/error.h"

namespace dtrain::cpu {
namespace {

using namespace dnnl;

memory::desc any_desc(const Shape& s, DType dtype = DType::f32) {
  return memory::desc(to_dims(s), dnnl_data_type(dtype), memory::format_tag::any);
}
memory::desc nhwc_desc(const Shape& s) {
  return memory::desc(to_dims(s), memory::data_type::f32, memory::format_tag::acdb);
}
bool starts_with(const char* s, std::string_view prefix) {
  return std::string_view(s).substr(0, prefix.size()) == prefix;
}

class CpuConv final : public ConvOp {
 public:
  // `masked_dy`: the backward passes take dy masked by the fused ReLU already, and no y (the
  // f32 op under a widened bf16 one, which masks dy while widening it).
  CpuConv(DnnlContext& ctx, const ConvSpec& s, ConvPath path, bool masked_dy = false)
      : ctx_(ctx), spec_(s), mask_dy_(s.relu && !masked_dy) {
    DTRAIN_CHECK(s.out_height() > 0 && s.out_width() > 0)
        << "conv output would be empty for input " << s.input_shape().str();
    DTRAIN_CHECK(s.dtype == DType::f32 || s.dtype == DType::bf16)
        << "conv: no " << dtype_name(s.dtype) << " activations";
    DTRAIN_CHECK(s.dtype == DType::f32 || path != ConvPath::direct)
        << "conv: the direct kernels are f32 only";
    const bool plain = s.src_block == 1 && s.dst_block == 1;
    switch (s.dtype == DType::f32 ? path : ConvPath::dnnl) {
      case ConvPath::automatic:
        if (plain) direct_ = direct_conv_suits(s);
        blocked_weights_ = blocked_weight_grad_suits(s) &&
                           choose_algorithms(s).backward_weights == algorithm::convolution_direct;
        break;
      case ConvPath::direct:
        DTRAIN_CHECK(plain && direct_conv_supports(s)) << "no direct convolution for this shape";
        direct_ = {true, true, true};
        break;
      case ConvPath::dnnl:
        break;
    }
    if (direct_.forward || direct_.backward_data || direct_.backward_weights)
      kernels_ = DirectConv(s, omp_get_max_threads());
    if (blocked_weights_) weight_grad_ = BlockedWeightGrad(s, omp_get_max_threads());
    try {
      make_primitives(ctx, s);
    } catch (const dnnl::error& e) {
      DTRAIN_CHECK(false) << "conv " << s.in_channels << " → " << s.out_channels << " "
                          << s.kernel_h << "x" << s.kernel_w << " in " << dtype_name(s.dtype)
                          << ": oneDNN has no convolution for it on this CPU (" << e.what() << ")";
    }
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    check(x, spec_.input_shape(), "x");
    check(y, spec_.output_shape(), "y");
    check_f32(w, spec_.weight_shape(), "w");
    ++forwards_;
    const float* bias = spec_.bias ? b.data<float>() : nullptr;
    if (direct_.forward)
      return kernels_.forward(x.data<float>(), w.data<float>(), bias, y.data<float>(), spec_.relu);
    fwd_src_.input(x);
    fwd_wei_.input(w);
    fwd_dst_.output(y);
    if (spec_.bias) bias_.set_data_handle(b.raw());
    fwd_.execute(ctx_.stream, fwd_args_);
    fwd_dst_.finish_output();
  }

  void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                     const Tensor& dx) override {
    check(dy, spec_.output_shape(), "dy");
    check(dx, spec_.input_shape(), "dx");
    check_f32(w, spec_.weight_shape(), "w");
    const float* mask = relu_output(y);
    if (direct_.backward_data)
      return kernels_.backward_data(mask, dy.data<float>(), w.data<float>(), dx.data<float>());
    bd_ddst_.input(masked(y, dy, /*reuse=*/true));
    bd_wei_.input(w);
    bd_dsrc_.output(dx);
    bwd_data_.execute(ctx_.stream, bd_args_);
    bd_dsrc_.finish_output();
  }

  void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dw,
                        const Tensor& db) override {
    check(x, spec_.input_shape(), "x");
    check(dy, spec_.output_shape(), "dy");
    check_f32(dw, spec_.weight_shape(), "dw");
    const float* mask = relu_output(y);
    float* dbias = spec_.bias ? db.data<float>() : nullptr;
    if (direct_.backward_weights)
      return kernels_.backward_weights(x.data<float>(), mask, dy.data<float>(), dw.data<float>(),
                                       dbias);
    if (blocked_weights_)
      return weight_grad_.run(x.data<float>(), masked(y, dy, /*reuse=*/false).data<float>(),
                              dw.data<float>(), dbias);
    bw_src_.input(x);
    bw_ddst_.input(masked(y, dy, /*reuse=*/false));
    bw_dwei_.output(dw);
    if (spec_.bias) bias_.set_data_handle(db.raw());
    bwd_weights_.execute(ctx_.stream, bw_args_);
    bw_dwei_.finish_output();
  }

 private:
  struct Algorithms {
    algorithm forward = algorithm::convolution_direct, backward_data = forward,
              backward_weights = forward;
  };

  // Direct or Winograd (see the top of the file): a rule from measurements, not a measurement
  // per run, so that every run (a resumed one too) computes with the same kernels. oneDNN's
  // Winograd kernels are f32 only.
  static Algorithms choose_algorithms(const ConvSpec& s) {
    const Algorithms direct;
    if (s.dtype != DType::f32) return direct;
    const Algorithms winograd{algorithm::convolution_winograd, algorithm::convolution_winograd,
                              algorithm::convolution_winograd};
    const char* forced = std::getenv("DTRAIN_CONV_ALGO");
    const bool applies = s.src_block == 16 && s.dst_block == 16 && s.kernel_h == 3 &&
                         s.kernel_w == 3 && s.stride_h == 1 && s.stride_w == 1;
    if (!applies || (forced != nullptr && std::string_view(forced) == "direct")) return direct;
    if (forced != nullptr && std::string_view(forced) == "winograd") return winograd;
    const bool wins =
        s.in_channels >= 32 && s.out_channels >= 32 && s.out_height() >= 4 && s.out_width() >= 4;
    return wins ? winograd : direct;
  }

  // The oneDNN primitives of the passes the direct kernels do not take, and their argument
  // maps (built once: each call only changes data pointers).
  void make_primitives(DnnlContext& ctx, const ConvSpec& s) {
    const Shape xs = s.input_shape(), ws = s.weight_shape(), ys = s.output_shape();
    // Blocked activations as they are (no reorder); plain ones as oneDNN likes them best.
    auto src = s.src_block > 1 ? activation_desc(xs, s.src_block, s.dtype) : any_desc(xs, s.dtype);
    auto dst = s.dst_block > 1 ? activation_desc(ys, s.dst_block, s.dtype) : any_desc(ys, s.dtype);
    // The weights as the products read them (the activations' type) and their gradient (f32).
    auto wei = any_desc(ws, s.dtype), dwei = any_desc(ws);
    auto bia = plain_desc({s.out_channels});
    auto no_bias = memory::desc();
    memory::dims strides{s.stride_h, s.stride_w}, pad{s.pad_h, s.pad_w};
    // Right padding so that oneDNN's output size equals ours.
    memory::dims pad_r{(s.out_height() - 1) * s.stride_h + s.kernel_h - s.height - s.pad_h,
                       (s.out_width() - 1) * s.stride_w + s.kernel_w - s.width - s.pad_w};
    const Algorithms algo = choose_algorithms(s);
    primitive_attr attr;
    if (s.relu) {
      post_ops ops;
      ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    auto forward_pd = [&](algorithm a) {
      return convolution_forward::primitive_desc({prop_kind::forward_training, a, src, wei,
                                                  s.bias ? bia : no_bias, dst, strides, pad, pad_r},
                                                 attr, ctx.engine);
    };
    // Also the backward passes' hint (which must have the backward pass's algorithm).
    auto fwd_pd = forward_pd(algo.forward);
    const auto px = activation_desc(xs, s.src_block, s.dtype), pw = plain_desc(ws),
               py = activation_desc(ys, s.dst_block, s.dtype);
    bias_ = memory(bia, ctx.engine, DNNL_MEMORY_NONE);
    if (!direct_.forward) {
      fwd_ = convolution_forward(fwd_pd);
      fwd_src_ = BoundArg(ctx, px, fwd_pd.src_desc());
      fwd_wei_ = BoundArg(ctx, pw, fwd_pd.weights_desc());
      fwd_dst_ = BoundArg(ctx, py, fwd_pd.dst_desc());
      fwd_args_ = {{DNNL_ARG_SRC, fwd_src_.internal()},
                   {DNNL_ARG_WEIGHTS, fwd_wei_.internal()},
                   {DNNL_ARG_DST, fwd_dst_.internal()}};
      if (s.bias) fwd_args_.emplace(DNNL_ARG_BIAS, bias_);
    }
    if (!direct_.backward_data) {
      auto pd = convolution_backward_data::primitive_desc(
          {algo.backward_data, src, wei, dst, strides, pad, pad_r}, ctx.engine,
          forward_pd(algo.backward_data));
      bwd_data_ = convolution_backward_data(pd);
      bd_ddst_ = BoundArg(ctx, py, pd.diff_dst_desc());
      bd_wei_ = BoundArg(ctx, pw, pd.weights_desc());
      bd_dsrc_ = BoundArg(ctx, px, pd.diff_src_desc());
      bd_args_ = {{DNNL_ARG_DIFF_DST, bd_ddst_.internal()},
                  {DNNL_ARG_WEIGHTS, bd_wei_.internal()},
                  {DNNL_ARG_DIFF_SRC, bd_dsrc_.internal()}};
    }
    if (!direct_.backward_weights && !blocked_weights_) {
      auto make = [&](const memory::desc& x, const memory::desc& y) {
        return convolution_backward_weights::primitive_desc(
            {algo.backward_weights, x, dwei, s.bias ? bia : no_bias, y, strides, pad, pad_r},
            ctx.engine, forward_pd(algo.backward_weights));
      };
      auto pd = make(src, dst);
      // oneDNN 2.6's blocked weight-gradient kernels need input channels in multiples of 16
      // (or the 1–3 of a first layer) for AVX-512 and otherwise fall back to AVX2; its NHWC
      // kernel has no such limit (LeNet's 6→16 twice as fast, reorders included).
      if (s.dtype == DType::f32 && s.src_block == 1 && s.dst_block == 1 &&
          starts_with(pd.impl_info_str(), "jit:avx2")) {
        auto nhwc = make(nhwc_desc(xs), nhwc_desc(ys));
        if (starts_with(nhwc.impl_info_str(), "jit:avx512")) pd = nhwc;
      }
      DTRAIN_CHECK(pd.diff_weights_desc().data_type() == memory::data_type::f32 &&
                   (!s.bias || pd.diff_bias_desc() == bia))
          << "oneDNN's convolution would not write an f32 weight and bias gradient";
      bwd_weights_ = convolution_backward_weights(pd);
      bw_src_ = BoundArg(ctx, px, pd.src_desc());
      bw_ddst_ = BoundArg(ctx, py, pd.diff_dst_desc());
      bw_dwei_ = BoundArg(ctx, pw, pd.diff_weights_desc());
      bw_args_ = {{DNNL_ARG_SRC, bw_src_.internal()},
                  {DNNL_ARG_DIFF_DST, bw_ddst_.internal()},
                  {DNNL_ARG_DIFF_WEIGHTS, bw_dwei_.internal()}};
      if (s.bias) bw_args_.emplace(DNNL_ARG_DIFF_BIAS, bias_);
    }
  }

  // The fused ReLU's output, whose positive entries let the gradient through; null without.
  const float* relu_output(const Tensor& y) const {
    if (!mask_dy_) return nullptr;
    check(y, spec_.output_shape(), "y");
    return y.data<float>();
  }
  // out = y > 0 ? dy : 0 in the activations' type.
  void mask(const Tensor& y, const Tensor& dy, const Tensor& out) const {
    if (spec_.dtype == DType::bf16)
      return relu_mask(y.data<bf16_t>(), dy.data<bf16_t>(), out.data<bf16_t>(), dy.numel());
    relu_mask(y.data<float>(), dy.data<float>(), out.data<float>(), dy.numel());
  }
  // dy as the oneDNN backward passes must see it: masked by the fused ReLU's output, in place
  // when the caller allows it (spec.dy_writable), else into the context's shared scratch. The
  // weight gradient's call masks; the data gradient's, right after it in the same backward (no
  // forward since: the key is the forward count) on the same y and dy, reuses that. Only this
  // order: a layer whose input needs no gradient calls the weight gradient alone.
  Tensor masked(const Tensor& y, const Tensor& dy, bool reuse) {
    if (!mask_dy_) return dy;
    const Key key{y.raw(), dy.raw(), forwards_};
    const bool again = reuse && masked_key_ == key;
    masked_key_ = reuse ? Key{} : key;
    if (spec_.dy_writable) {
      if (!again) mask(y, dy, dy);
      return dy;
    }
    if (again && ctx_.scratch_generation() == masked_generation_) return masked_;
    // The scratch is counted in floats: enough of them for dy's elements.
    const int64_t floats = (static_cast<int64_t>(dy.bytes()) + 3) / 4;
    masked_ = Tensor::borrow(ctx_.scratch(floats).raw(), dy.shape(), dy.dtype());
    mask(y, dy, masked_);
    masked_generation_ = ctx_.scratch_generation();
    return masked_;
  }

  // An activation or its gradient, in the spec's dtype.
  void check(const Tensor& t, const Shape& shape, const char* what) const {
    DTRAIN_CHECK(t.numel() == shape.numel() && t.dtype() == spec_.dtype)
        << "conv " << what << ": " << t.shape().str() << " " << dtype_name(t.dtype())
        << ", expected " << shape.str() << " " << dtype_name(spec_.dtype);
  }
  // Weights and their gradient: f32 in any precision.
  static void check_f32(const Tensor& t, const Shape& shape, const char* what) {
    DTRAIN_CHECK(t.numel() == shape.numel() && t.dtype() == DType::f32)
        << "conv " << what << ": " << t.shape().str() << " " << dtype_name(t.dtype())
        << ", expected " << shape.str() << " f32";
  }

  DnnlContext& ctx_;
  ConvSpec spec_;
  bool mask_dy_;  // the backward passes mask dy by the fused ReLU's output
  DirectConvPasses direct_;
  DirectConv kernels_;
  bool blocked_weights_ = false;  // the weight gradient by BlockedWeightGrad
  BlockedWeightGrad weight_grad_;
  convolution_forward fwd_;
  convolution_backward_data bwd_data_;
  convolution_backward_weights bwd_weights_;
  BoundArg fwd_src_, fwd_wei_, fwd_dst_, bd_ddst_, bd_wei_, bd_dsrc_, bw_src_, bw_ddst_, bw_dwei_;
  memory bias_;
  DnnlArgs fwd_args_, bd_args_, bw_args_;
  struct Key {
    const void* y = nullptr;
    const void* dy = nullptr;
    uint64_t forward = 0;
    bool operator==(const Key&) const = default;
  };
  uint64_t forwards_ = 0;  // forward calls so far
  Key masked_key_;         // what the last weight-gradient call masked
  Tensor masked_;          // ... into the context's scratch (not dy_writable)
  uint64_t masked_generation_ = 0;
};

}  // namespace

std::unique_ptr<ConvOp> make_conv(DnnlContext& ctx, const ConvSpec& spec, ConvPath path) {
  if (spec.dtype != DType::bf16 || bf16_products() == Bf16Products::native)
    return std::make_unique<CpuConv>(ctx, spec, path);
  ConvSpec f32 = spec;
  f32.dtype = DType::f32;
  f32.dy_writable = false;  // it reads the widened op's scratch, masked already
  const WidenedShape shape{"conv",
                           spec.batch,
                           spec.in_channels * spec.height * spec.width,
                           spec.out_channels * spec.out_height() * spec.out_width(),
                           spec.weight_shape(),
                           spec.bias ? spec.out_channels : 0,
                           spec.relu};
  return widen_conv(ctx, shape, [&ctx, f32, path](int64_t batch) {
    ConvSpec chunk = f32;
    chunk.batch = batch;
    return std::make_unique<CpuConv>(ctx, chunk, path, /*masked_dy=*/true);
  });
}

}  // namespace dtrain::cpu
