// Batch normalisation on oneDNN primitives (separate scale and shift, plain NCHW). Training
// uses batch statistics (biased variance, as oneDNN and cuDNN compute them); the caller keeps
// the running estimates.
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace dtrain::cpu {
namespace {

using namespace dnnl;

class CpuBatchNorm final : public BatchNormOp {
 public:
  CpuBatchNorm(DnnlContext& ctx, const BatchNormSpec& s) : ctx_(ctx) {
    auto md = plain_desc(s.shape());
    auto c = plain_desc({s.channels});
    const auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
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
    unused_shift_ = Tensor::zeros({s.channels});
    scale_ = mk(c), shift_ = mk(c), mean_ = mk(c), var_ = mk(c), dscale_ = mk(c), dshift_ = mk(c);
    fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_SCALE, scale_}, {DNNL_ARG_SHIFT, shift_},
                 {DNNL_ARG_DST, dst_}, {DNNL_ARG_MEAN, mean_},   {DNNL_ARG_VARIANCE, var_}};
    bwd_args_ = {{DNNL_ARG_SRC, src_},           {DNNL_ARG_DIFF_DST, dst_},
                 {DNNL_ARG_SCALE, scale_},       {DNNL_ARG_SHIFT, shift_},
                 {DNNL_ARG_MEAN, mean_},         {DNNL_ARG_VARIANCE, var_},
                 {DNNL_ARG_DIFF_SRC, diff_src_}, {DNNL_ARG_DIFF_SCALE, dscale_},
                 {DNNL_ARG_DIFF_SHIFT, dshift_}};
  }

  void forward_training(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y,
                        const Tensor& mean, const Tensor& variance) override {
    bind(x, scale, shift, mean, variance);
    dst_.set_data_handle(y.raw());
    train_.execute(ctx_.stream, fwd_args_);
  }

  void forward_inference(const Tensor& x, const Tensor& scale, const Tensor& shift,
                         const Tensor& mean, const Tensor& variance, const Tensor& y) override {
    bind(x, scale, shift, mean, variance);
    dst_.set_data_handle(y.raw());
    infer_.execute(ctx_.stream, fwd_args_);
  }

  void backward(const Tensor& x, const Tensor& dy, const Tensor& scale, const Tensor& mean,
                const Tensor& variance, const Tensor& dx, const Tensor& dscale,
                const Tensor& dshift) override {
    bind(x, scale, unused_shift_, mean, variance);
    dst_.set_data_handle(dy.raw());
    diff_src_.set_data_handle(dx.raw());
    dscale_.set_data_handle(dscale.raw());
    dshift_.set_data_handle(dshift.raw());
    bwd_.execute(ctx_.stream, bwd_args_);
  }

 private:
  void bind(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& mean,
            const Tensor& variance) {
    src_.set_data_handle(x.raw());
    scale_.set_data_handle(scale.raw());
    shift_.set_data_handle(shift.raw());
    mean_.set_data_handle(mean.raw());
    var_.set_data_handle(variance.raw());
  }

  DnnlContext& ctx_;
  batch_normalization_forward train_, infer_;
  batch_normalization_backward bwd_;
  // oneDNN's backward insists on a shift argument although the gradient does not depend on it.
  Tensor unused_shift_;
  memory src_, dst_, diff_src_, scale_, shift_, mean_, var_, dscale_, dshift_;
  DnnlArgs fwd_args_, bwd_args_;  // the inference forward takes the training one's arguments
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batchnorm(DnnlContext& ctx, const BatchNormSpec& spec) {
  return std::make_unique<CpuBatchNorm>(ctx, spec);
}

}  // namespace dtrain::cpu
