// GELU on its own kernels (gelu.cu): element-wise over the count, so any layout.
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace dtrain::cuda {
namespace {

class CudaGelu final : public GeluOp {
 public:
  CudaGelu(CudaContext& ctx, const GeluSpec& spec)
      : ctx_(ctx), numel_(spec.shape.numel()), tanh_(spec.approximate == GeluApproximation::tanh) {}
  void forward(const Tensor& x, const Tensor& y) override {
    DTRAIN_CHECK(x.numel() == numel_) << "gelu: " << x.shape().str() << " is not the op's size";
    check_device_f32(x, numel_, "gelu forward");
    check_device_f32(y, numel_, "gelu forward");
    gelu_forward_f32(x.data<float>(), y.data<float>(), numel_, tanh_, ctx_.stream());
  }
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) override {
    DTRAIN_CHECK(x.numel() == numel_) << "gelu: " << x.shape().str() << " is not the op's size";
    check_device_f32(x, numel_, "gelu backward");
    check_device_f32(dy, numel_, "gelu backward");
    check_device_f32(dx, numel_, "gelu backward");
    gelu_backward_f32(x.data<float>(), dy.data<float>(), dx.data<float>(), numel_, tanh_,
                      ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  int64_t numel_;
  bool tanh_;
};

}  // namespace

std::unique_ptr<GeluOp> make_gelu(CudaContext& ctx, const GeluSpec& spec) {
  return std::make_unique<CudaGelu>(ctx, spec);
}

}  // namespace dtrain::cuda
