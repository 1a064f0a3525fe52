// The ops that are one own kernel each: ReLU, softmax cross-entropy, dropout.
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

namespace {

class CudaRelu final : public ReluOp {
 public:
  CudaRelu(CudaContext& ctx, const Shape& shape) : ctx_(ctx), numel_(shape.numel()) {}
  void forward(const Tensor& x, const Tensor& y) override {
    check_device_f32(y, x.numel(), "relu forward");
    bias_relu_f32(x.data<float>(), nullptr, y.data<float>(), x.numel(), 1, 1, true, ctx_.stream());
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) override {
    // y > 0 ⇔ x > 0; reading y keeps the in-place case (y aliasing x) right as well.
    const Tensor& out = y.defined() ? y : x;
    check_device_f32(dx, dy.numel(), "relu backward");
    relu_backward_f32(out.data<float>(), dy.data<float>(), dx.data<float>(), dy.numel(),
                      ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  int64_t numel_;
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

class CudaDropout final : public DropoutOp {
 public:
  CudaDropout(CudaContext& ctx, const Shape& shape) : ctx_(ctx), numel_(shape.numel()) {}
  void forward(const Tensor& x, const Tensor& y, const Tensor& mask, float p, uint64_t seed,
               uint64_t stream) override {
    DTRAIN_CHECK(x.numel() <= numel_ && y.numel() == x.numel() && mask.numel() >= x.numel())
        << "dropout: size mismatch";
    dropout_forward(x.data<float>(), y.data<float>(), mask.data<uint8_t>(), x.numel(), p, seed,
                    stream, ctx_.stream());
  }
  void backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) override {
    dropout_backward(dy.data<float>(), mask.data<uint8_t>(), dx.data<float>(), dy.numel(), p,
                     ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  int64_t numel_;
};

}  // namespace

std::unique_ptr<ReluOp> make_relu(CudaContext& ctx, const Shape& shape) {
  return std::make_unique<CudaRelu>(ctx, shape);
}
std::unique_ptr<SoftmaxXentOp> make_softmax_xent(CudaContext& ctx, const SoftmaxXentSpec& spec) {
  return std::make_unique<CudaSoftmaxXent>(ctx, spec);
}
std::unique_ptr<DropoutOp> make_dropout(CudaContext& ctx, const Shape& shape) {
  return std::make_unique<CudaDropout>(ctx, shape);
}

}  // namespace dtrain::cuda
