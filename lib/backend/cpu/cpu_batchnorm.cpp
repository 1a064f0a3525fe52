// Batch normalisation on oneDNN primitives (separate scale and shift, plain NCHW or
// channel-blocked). Training uses batch statistics (biased variance, as oneDNN and cuDNN
// compute them); the caller keeps the running estimates. A fused ReLU is oneDNN's
// fuse_norm_relu on blocked layouts: one pass each way, the forward keeping a bit mask for the
// backward. On plain NCHW oneDNN 2.6 has fuse_norm_relu only in a generic kernel (4× slower
// than its plain batch norm), so there the ReLU is a pass of its own over the output, and the
// backward masks dy with the output into the context's scratch.
// In bf16 (spec.dtype) x, y, dy and dx are bf16 memories of the same primitives: oneDNN computes
// the statistics and the normalisation in f32 and rounds y and dx once; scale, shift, mean,
// variance and their gradients stay f32.
#include "backend/cpu/bf16.h"  // bf16_t: the separate ReLU's passes in bf16
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/relu_mask.h"  // relu_mask
#include "core/error.h"

namespace dtrain::cpu {
namespace {

using namespace dnnl;

// The activations' descriptor: f32 as every op's, or the same layout in bf16.
memory::desc data_desc(const BatchNormSpec& s) {
  if (s.dtype == DType::f32) return activation_desc(s.shape(), s.block);
  DTRAIN_CHECK(s.dtype == DType::bf16) << "batch norm: no " << dtype_name(s.dtype) << " kernels";
  DTRAIN_CHECK(s.block == 1 || s.block == 8 || s.block == 16)
      << "batch norm: unsupported channel block " << s.block;
  const dnnl_tag tag = s.block == 1   ? dnnl_tag::nchw
                       : s.block == 8 ? dnnl_tag::nChw8c
                                      : dnnl_tag::nChw16c;
  return memory::desc(to_dims(s.shape()), memory::data_type::bf16, tag);
}

bool positive(float v) {
  return v > 0.0f;
}
bool positive(bf16_t v) {
  return bf16_to_f32(v) > 0.0f;
}

// The separate ReLU's passes over T (f32 or bf16) elements: y = max(y, 0) in place, and
// out = y > 0 ? dy : 0.
template <class T>
void clamp_in_place(T* p, int64_t n) {
#pragma omp parallel for simd if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) p[i] = positive(p[i]) ? p[i] : T{0};
}
template <class T>
void mask_by_output(const T* y, const T* dy, T* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = positive(y[i]) ? dy[i] : T{0};
}

class CpuBatchNorm final : public BatchNormOp {
 public:
  CpuBatchNorm(DnnlContext& ctx, const BatchNormSpec& s) : ctx_(ctx), dtype_(s.dtype) {
    auto md = data_desc(s);
    auto c = plain_desc({s.channels});
    auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    fused_relu_ = s.relu && s.block > 1;
    separate_relu_ = s.relu && !fused_relu_;
    if (fused_relu_) flags = flags | normalization_flags::fuse_norm_relu;
    auto train_pd = batch_normalization_forward::primitive_desc(
        {prop_kind::forward_training, md, s.epsilon, flags}, ctx.engine);
    auto infer_pd =
        batch_normalization_forward::primitive_desc({prop_kind::forward_inference, md, s.epsilon,
                                                     flags | normalization_flags::use_global_stats},
                                                    ctx.engine);
    auto bwd_pd = batch_normalization_backward::primitive_desc(
        {prop_kind::backward, md, md, s.epsilon, flags}, ctx.engine, train_pd);
    train_ = batch_normalization_forward(train_pd);
    infer_ = batch_normalization_forward(infer_pd);
    bwd_ = batch_normalization_backward(bwd_pd);
    auto mk = [&](const memory::desc& d) { return memory(d, ctx.engine, DNNL_MEMORY_NONE); };
    src_ = mk(md), dst_ = mk(md), diff_src_ = mk(md);
    ws_desc_ = train_pd.workspace_desc();
    unused_shift_ = Tensor::zeros({s.channels});
    scale_ = mk(c), shift_ = mk(c), mean_ = mk(c), var_ = mk(c), dscale_ = mk(c), dshift_ = mk(c);
    fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_SCALE, scale_}, {DNNL_ARG_SHIFT, shift_},
                 {DNNL_ARG_DST, dst_}, {DNNL_ARG_MEAN, mean_},   {DNNL_ARG_VARIANCE, var_}};
    bwd_args_ = {{DNNL_ARG_SRC, src_},           {DNNL_ARG_DIFF_DST, dst_},
                 {DNNL_ARG_SCALE, scale_},       {DNNL_ARG_SHIFT, shift_},
                 {DNNL_ARG_MEAN, mean_},         {DNNL_ARG_VARIANCE, var_},
                 {DNNL_ARG_DIFF_SRC, diff_src_}, {DNNL_ARG_DIFF_SCALE, dscale_},
                 {DNNL_ARG_DIFF_SHIFT, dshift_}};
    infer_args_ = fwd_args_;
    if (ws_desc_.get_size() > 0) {
      ws_ = mk(ws_desc_);
      fwd_args_.emplace(DNNL_ARG_WORKSPACE, ws_);
      bwd_args_.emplace(DNNL_ARG_WORKSPACE, ws_);
    }
  }

  size_t workspace_bytes() const override { return ws_desc_.get_size(); }

  void forward_training(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y,
                        const Tensor& mean, const Tensor& variance,
                        const Tensor& workspace) override {
    bind(x, scale, shift, mean, variance);
    dst_.set_data_handle(y.raw());
    bind_workspace(workspace);
    train_.execute(ctx_.stream, fwd_args_);
    clamp(y);
  }

  void forward_inference(const Tensor& x, const Tensor& scale, const Tensor& shift,
                         const Tensor& mean, const Tensor& variance, const Tensor& y) override {
    bind(x, scale, shift, mean, variance);
    dst_.set_data_handle(y.raw());
    infer_.execute(ctx_.stream, infer_args_);
    clamp(y);
  }

  void backward(const Tensor& x, const Tensor& y, const Tensor& dy_out, const Tensor& scale,
                const Tensor& mean, const Tensor& variance, const Tensor& workspace,
                const Tensor& dx, const Tensor& dscale, const Tensor& dshift) override {
    bind(x, scale, unused_shift_, mean, variance);
    bind_workspace(workspace);
    Tensor dy = dy_out;
    if (separate_relu_ && dtype_ == DType::f32) {
      dy = ctx_.scratch(dy_out.numel());
      relu_mask(y.data<float>(), dy_out.data<float>(), dy.data<float>(), dy.numel());
    } else if (separate_relu_) {  // bf16: the scratch's floats hold twice as many elements
      const int64_t n = dy_out.numel();
      dy = Tensor::borrow(ctx_.scratch((n + 1) / 2).raw(), dy_out.shape(), DType::bf16);
      mask_by_output(y.data<bf16_t>(), dy_out.data<bf16_t>(), dy.data<bf16_t>(), n);
    }
    dst_.set_data_handle(dy.raw());
    diff_src_.set_data_handle(dx.raw());
    dscale_.set_data_handle(dscale.raw());
    dshift_.set_data_handle(dshift.raw());
    bwd_.execute(ctx_.stream, bwd_args_);
  }

 private:
  void clamp(const Tensor& y) {
    if (!separate_relu_) return;
    if (dtype_ == DType::bf16) return clamp_in_place(y.data<bf16_t>(), y.numel());
    clamp_in_place(y.data<float>(), y.numel());
  }
  void bind_workspace(const Tensor& workspace) {
    if (ws_desc_.get_size() == 0) return;
    DTRAIN_CHECK(workspace.bytes() >= ws_desc_.get_size()) << "batch norm workspace too small";
    ws_.set_data_handle(workspace.raw());
  }
  void bind(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& mean,
            const Tensor& variance) {
    DTRAIN_CHECK(x.dtype() == dtype_)
        << "batch norm: " << dtype_name(x.dtype()) << " input to a " << dtype_name(dtype_) << " op";
    src_.set_data_handle(x.raw());
    scale_.set_data_handle(scale.raw());
    shift_.set_data_handle(shift.raw());
    mean_.set_data_handle(mean.raw());
    var_.set_data_handle(variance.raw());
  }

  DnnlContext& ctx_;
  DType dtype_;  // of x, y, dy, dx
  batch_normalization_forward train_, infer_;
  batch_normalization_backward bwd_;
  // oneDNN's backward insists on a shift argument although the gradient does not depend on it.
  Tensor unused_shift_;
  memory src_, dst_, diff_src_, scale_, shift_, mean_, var_, dscale_, dshift_, ws_;
  memory::desc ws_desc_;  // the fused ReLU's mask
  bool fused_relu_ = false, separate_relu_ = false;
  DnnlArgs fwd_args_, infer_args_, bwd_args_;
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batchnorm(DnnlContext& ctx, const BatchNormSpec& spec) {
  return std::make_unique<CpuBatchNorm>(ctx, spec);
}

}  // namespace dtrain::cpu
