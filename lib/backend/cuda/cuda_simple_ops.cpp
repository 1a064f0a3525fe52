// The ops that are one own kernel each: ReLU, softmax cross-entropy, dropout (ReLU and dropout
// in f32 or bf16).
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace dtrain::cuda {

void check_device_f32(const Tensor& t, int64_t numel, const char* what) {
  DTRAIN_CHECK(t.device() == Device::cuda && t.dtype() == DType::f32)
      << what << ": expected an f32 tensor on the GPU, got " << dtype_name(t.dtype()) << " on "
      << device_name(t.device());
  DTRAIN_CHECK(t.numel() >= numel)
      << what << ": " << t.shape().str() << " holds fewer than " << numel << " elements";
}

void check_device(const Tensor& t, DType dtype, int64_t numel, const char* what) {
  DTRAIN_CHECK(t.device() == Device::cuda && t.dtype() == dtype)
      << what << ": expected a " << dtype_name(dtype) << " tensor on the GPU, got "
      << dtype_name(t.dtype()) << " on " << device_name(t.device());
  DTRAIN_CHECK(t.numel() >= numel)
      << what << ": " << t.shape().str() << " holds fewer than " << numel << " elements";
}

void check_activation_dtype(DType dtype, const char* what) {
  DTRAIN_CHECK(dtype == DType::f32 || dtype == DType::bf16)
      << what << ": activations are f32 or bf16, not " << dtype_name(dtype);
}

namespace {

class CudaRelu final : public ReluOp {
 public:
  CudaRelu(CudaContext& ctx, const Shape& shape, DType dtype)
      : ctx_(ctx), numel_(shape.numel()), dtype_(dtype) {
    check_activation_dtype(dtype, "relu");
  }
  void forward(const Tensor& x, const Tensor& y) override {
    check_device(x, dtype_, x.numel(), "relu forward");
    check_device(y, dtype_, x.numel(), "relu forward");
    if (dtype_ == DType::bf16)
      relu_forward_bf16(x.data<uint16_t>(), y.data<uint16_t>(), x.numel(), ctx_.stream());
    else
      bias_relu_f32(x.data<float>(), nullptr, y.data<float>(), x.numel(), 1, 1, true,
                    ctx_.stream());
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) override {
    // y > 0 ⇔ x > 0; reading y keeps the in-place case (y aliasing x) right as well.
    const Tensor& out = y.defined() ? y : x;
    check_device(out, dtype_, dy.numel(), "relu backward");
    check_device(dy, dtype_, dy.numel(), "relu backward");
    check_device(dx, dtype_, dy.numel(), "relu backward");
    if (dtype_ == DType::bf16)
      relu_backward_bf16(out.data<uint16_t>(), dy.data<uint16_t>(), dx.data<uint16_t>(), dy.numel(),
                         ctx_.stream());
    else
      relu_backward_f32(out.data<float>(), dy.data<float>(), dx.data<float>(), dy.numel(),
                        ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  int64_t numel_;
  DType dtype_;
};

class CudaSoftmaxXent final : public SoftmaxXentOp {
 public:
  CudaSoftmaxXent(CudaContext& ctx, const SoftmaxXentSpec& s) : ctx_(ctx), spec_(s) {}
  void forward(const Tensor& logits, const Tensor& labels, const Tensor& probs,
               const Tensor& stats) override {
    const int64_t rows = logits.shape()[0], k = spec_.classes;
    DTRAIN_CHECK(logits.numel() == rows * k && labels.numel() == rows && probs.numel() == rows * k)
        << "softmax_xent: logits " << logits.shape().str() << ", labels " << labels.shape().str();
    DTRAIN_CHECK(labels.device() == Device::cuda && labels.dtype() == DType::i32)
        << "softmax_xent: labels must be i32 on the GPU";
    check_device_f32(stats, 2, "softmax_xent stats");
    softmax_xent_forward(logits.data<float>(), labels.data<int32_t>(), probs.data<float>(),
                         stats.data<float>(), rows, k, ctx_.stream());
  }
  void backward(const Tensor& probs, const Tensor& labels, const Tensor& dlogits,
                float grad_scale) override {
    softmax_xent_backward(probs.data<float>(), labels.data<int32_t>(), dlogits.data<float>(),
                          probs.shape()[0], spec_.classes, grad_scale, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  SoftmaxXentSpec spec_;
};

// In bf16 the mask is f32's (the draw ignores the data), each kept value scaled in f32 and
// rounded once (cpu_dropout.cpp).
class CudaDropout final : public DropoutOp {
 public:
  CudaDropout(CudaContext& ctx, const Shape& shape, DType dtype)
      : ctx_(ctx), numel_(shape.numel()), dtype_(dtype) {
    check_activation_dtype(dtype, "dropout");
  }
  void forward(const Tensor& x, const Tensor& y, const Tensor& mask, float p, uint64_t seed,
               uint64_t stream) override {
    DTRAIN_CHECK(x.numel() <= numel_ && y.numel() == x.numel() && mask.numel() >= x.numel())
        << "dropout: size mismatch";
    if (dtype_ == DType::bf16) {
      check_device(x, dtype_, x.numel(), "dropout forward");
      check_device(y, dtype_, x.numel(), "dropout forward");
      dropout_forward_bf16(x.data<uint16_t>(), y.data<uint16_t>(), mask.data<uint8_t>(), x.numel(),
                           p, seed, stream, ctx_.stream());
      return;
    }
    dropout_forward(x.data<float>(), y.data<float>(), mask.data<uint8_t>(), x.numel(), p, seed,
                    stream, ctx_.stream());
  }
  void backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) override {
    if (dtype_ == DType::bf16) {
      check_device(dy, dtype_, dy.numel(), "dropout backward");
      check_device(dx, dtype_, dy.numel(), "dropout backward");
      dropout_backward_bf16(dy.data<uint16_t>(), mask.data<uint8_t>(), dx.data<uint16_t>(),
                            dy.numel(), p, ctx_.stream());
      return;
    }
    dropout_backward(dy.data<float>(), mask.data<uint8_t>(), dx.data<float>(), dy.numel(), p,
                     ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  int64_t numel_;
  DType dtype_;
};

}  // namespace

std::unique_ptr<ReluOp> make_relu(CudaContext& ctx, const Shape& shape, DType dtype) {
  return std::make_unique<CudaRelu>(ctx, shape, dtype);
}
std::unique_ptr<SoftmaxXentOp> make_softmax_xent(CudaContext& ctx, const SoftmaxXentSpec& spec) {
  return std::make_unique<CudaSoftmaxXent>(ctx, spec);
}
std::unique_ptr<DropoutOp> make_dropout(CudaContext& ctx, const Shape& shape, DType dtype) {
  return std::make_unique<CudaDropout>(ctx, shape, dtype);
}

}  // namespace dtrain::cuda
