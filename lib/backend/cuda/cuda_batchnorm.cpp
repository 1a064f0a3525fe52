// Batch normalisation on cuDNN (CUDNN_BATCHNORM_SPATIAL: per channel over N, H, W; [N, C]
// inputs as N×C×1×1). The interface wants the batch mean and the *biased* variance, as the CPU
// writes them; cuDNN reports batch statistics only as its running estimates, whose variance is
// the unbiased one. With exponentialAverageFactor 1 the running estimates are the batch
// statistics (the buffers are zeroed first: cuDNN blends the old contents in with weight 0,
// and 0·NaN from uninitialised memory would still be NaN); the variance is then scaled by
// (m−1)/m, m = N·H·W. The backward uses the mean and variance it is given, as the CPU does:
// cuDNN's saved inverse standard deviation is recomputed from them into a per-op scratch,
// so no statistics live in the op between calls. A fused ReLU clamps the output in place after
// cuDNN's pass and masks dy with the output into a scratch before its backward (no workspace).
// bf16 activations (BatchNormSpec::dtype): x, y, dy, dx bf16 descriptors, scale, shift and the
// statistics f32 (cuDNN derives their f32 descriptor from x's); cuDNN reads bf16, computes in
// f32 and rounds y and dx once, as the CPU's oneDNN batch norm does. The fused ReLU's clamp and
// mask are exact on bf16 values.
#include <memory>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cudnn_descriptors.h"  // descriptor handles, nchw_desc
#include "backend/cuda/kernels.h"            // scale_f32
#include "backend/cuda/norm_kernels.h"       // inv_std_f32
#include "core/error.h"

namespace dtrain::cuda {
namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

class CudaBatchNorm final : public BatchNormOp {
 public:
  CudaBatchNorm(CudaContext& ctx, const BatchNormSpec& s)
      : ctx_(ctx), s_(s), count_(s.batch * s.height * s.width) {
    DTRAIN_CHECK(s.epsilon >= CUDNN_BN_MIN_EPSILON)
        << "batchnorm: epsilon " << s.epsilon << " is below cuDNN's minimum "
        << CUDNN_BN_MIN_EPSILON;
    check_activation_dtype(s.dtype, "batchnorm");
    x_ = new_tensor_desc();
    DTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(
        x_.get(), CUDNN_TENSOR_NCHW, bf16() ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT,
        dnn_int(s.batch, "batchnorm"), dnn_int(s.channels, "batchnorm"),
        dnn_int(s.height, "batchnorm"), dnn_int(s.width, "batchnorm")));
    stats_ = new_tensor_desc();  // 1×C×1×1
    DTRAIN_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(stats_.get(), x_.get(), kMode));
    inv_std_ = Tensor::empty({s.channels}, DType::f32, ctx.allocator());
    DTRAIN_CHECK(s.block == 1) << "batchnorm: the CUDA backend has plain layouts only";
    if (s.relu) masked_ = Tensor::empty(s.shape(), s.dtype, ctx.allocator());
  }

  size_t workspace_bytes() const override { return 0; }

  void forward_training(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y,
                        const Tensor& mean, const Tensor& variance, const Tensor&) override {
    check_data(x, "x");
    check_data(y, "y");
    check_channels(scale, "scale");
    check_channels(shift, "shift");
    check_channels(mean, "mean");
    check_channels(variance, "variance");
    const size_t stat_bytes = static_cast<size_t>(s_.channels) * sizeof(float);
    DTRAIN_CUDA_CHECK(cudaMemsetAsync(mean.raw(), 0, stat_bytes, ctx_.stream()));
    DTRAIN_CUDA_CHECK(cudaMemsetAsync(variance.raw(), 0, stat_bytes, ctx_.stream()));
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        ctx_.cudnn(), kMode, &one, &zero, x_.get(), x.raw(), x_.get(), y.raw(), stats_.get(),
        scale.data<float>(), shift.data<float>(), /*exponentialAverageFactor=*/1.0,
        mean.data<float>(), variance.data<float>(), s_.epsilon, /*resultSaveMean=*/nullptr,
        /*resultSaveInvVariance=*/nullptr));
    if (count_ > 1) {
      const double unbiased_to_biased =
          static_cast<double>(count_ - 1) / static_cast<double>(count_);
      scale_f32(variance.data<float>(), static_cast<float>(unbiased_to_biased), s_.channels,
                ctx_.stream());
    } else {  // one value per channel: the biased variance is 0 (cuDNN's unbiased one is 0/0)
      DTRAIN_CUDA_CHECK(cudaMemsetAsync(variance.raw(), 0, stat_bytes, ctx_.stream()));
    }
    clamp(y);
  }

  void forward_inference(const Tensor& x, const Tensor& scale, const Tensor& shift,
                         const Tensor& mean, const Tensor& variance, const Tensor& y) override {
    check_data(x, "x");
    check_data(y, "y");
    check_channels(scale, "scale");
    check_channels(shift, "shift");
    check_channels(mean, "mean");
    check_channels(variance, "variance");
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
        ctx_.cudnn(), kMode, &one, &zero, x_.get(), x.raw(), x_.get(), y.raw(), stats_.get(),
        scale.data<float>(), shift.data<float>(), mean.data<float>(), variance.data<float>(),
        s_.epsilon));
    clamp(y);
  }

  void backward(const Tensor& x, const Tensor& y, const Tensor& dy_out, const Tensor& scale,
                const Tensor& mean, const Tensor& variance, const Tensor&, const Tensor& dx,
                const Tensor& dscale, const Tensor& dshift) override {
    check_data(x, "x");
    check_data(dy_out, "dy");
    if (s_.relu) {
      check_data(y, "y");
      if (bf16())
        relu_backward_bf16(y.data<uint16_t>(), dy_out.data<uint16_t>(), masked_.data<uint16_t>(),
                           dy_out.numel(), ctx_.stream());
      else
        relu_backward_f32(y.data<float>(), dy_out.data<float>(), masked_.data<float>(),
                          dy_out.numel(), ctx_.stream());
    }
    const Tensor& dy = s_.relu ? masked_ : dy_out;
    check_data(dx, "dx");
    check_channels(scale, "scale");
    check_channels(mean, "mean");
    check_channels(variance, "variance");
    check_channels(dscale, "dscale");
    check_channels(dshift, "dshift");
    inv_std_f32(variance.data<float>(), inv_std_.data<float>(), s_.channels, s_.epsilon,
                ctx_.stream());
    const float one = 1.0f, zero = 0.0f;  // beta 0: dx, dscale and dshift are overwritten
    DTRAIN_CUDNN_CHECK(cudnnBatchNormalizationBackward(
        ctx_.cudnn(), kMode, &one, &zero, &one, &zero, x_.get(), x.raw(), x_.get(), dy.raw(),
        x_.get(), dx.raw(), stats_.get(), scale.data<float>(), dscale.data<float>(),
        dshift.data<float>(), s_.epsilon, mean.data<float>(), inv_std_.data<float>()));
  }

 private:
  bool bf16() const { return s_.dtype == DType::bf16; }
  void clamp(const Tensor& y) {
    if (!s_.relu) return;
    if (bf16())
      relu_forward_bf16(y.data<uint16_t>(), y.data<uint16_t>(), y.numel(), ctx_.stream());
    else
      bias_relu_f32(y.data<float>(), nullptr, y.data<float>(), y.numel(), 1, 1, true,
                    ctx_.stream());
  }
  void check_data(const Tensor& t, const char* what) const {
    const int64_t numel = s_.shape().numel();
    DTRAIN_CHECK(t.numel() == numel)
        << "batchnorm " << what << ": " << t.shape().str() << ", expected " << s_.shape().str()
        << " (plans are per batch size)";
    check_device(t, s_.dtype, numel, "batchnorm");
  }
  void check_channels(const Tensor& t, const char* what) const {
    DTRAIN_CHECK(t.numel() == s_.channels)
        << "batchnorm " << what << ": " << t.shape().str() << ", expected [" << s_.channels << "]";
    check_device_f32(t, s_.channels, "batchnorm");
  }

  CudaContext& ctx_;
  BatchNormSpec s_;
  int64_t count_;  // values per channel, N·H·W
  TensorDesc x_, stats_;
  Tensor inv_std_;  // scratch of backward, rewritten by every call
  Tensor masked_;   // fused ReLU: dy masked by the output
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batchnorm(CudaContext& ctx, const BatchNormSpec& spec) {
  return std::make_unique<CudaBatchNorm>(ctx, spec);
}

}  // namespace dtrain::cuda
