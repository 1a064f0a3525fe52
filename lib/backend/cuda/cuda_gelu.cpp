// GELU on its own kernels (gelu.cu): element-wise over the count, so any layout; f32 or bf16
// (read widened, computed in f32, rounded once).
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace dtrain::cuda {
namespace {

class CudaGelu final : public GeluOp {
 public:
  CudaGelu(CudaContext& ctx, const GeluSpec& spec)
      : ctx_(ctx),
        numel_(spec.shape.numel()),
        tanh_(spec.approximate == GeluApproximation::tanh),
        dtype_(spec.dtype) {
    check_activation_dtype(dtype_, "gelu");
  }
  void forward(const Tensor& x, const Tensor& y) override {
    DTRAIN_CHECK(x.numel() == numel_) << "gelu: " << x.shape().str() << " is not the op's size";
    check_device(x, dtype_, numel_, "gelu forward");
    check_device(y, dtype_, numel_, "gelu forward");
    if (dtype_ == DType::bf16)
      gelu_forward_bf16(x.data<uint16_t>(), y.data<uint16_t>(), numel_, tanh_, ctx_.stream());
    else
      gelu_forward_f32(x.data<float>(), y.data<float>(), numel_, tanh_, ctx_.stream());
  }
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) override {
    DTRAIN_CHECK(x.numel() == numel_) << "gelu: " << x.shape().str() << " is not the op's size";
    check_device(x, dtype_, numel_, "gelu backward");
    check_device(dy, dtype_, numel_, "gelu backward");
    check_device(dx, dtype_, numel_, "gelu backward");
    if (dtype_ == DType::bf16)
      gelu_backward_bf16(x.data<uint16_t>(), dy.data<uint16_t>(), dx.data<uint16_t>(), numel_,
                         tanh_, ctx_.stream());
    else
      gelu_backward_f32(x.data<float>(), dy.data<float>(), dx.data<float>(), numel_, tanh_,
                        ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  int64_t numel_;
  bool tanh_;
  DType dtype_;
};

}  // namespace

std::unique_ptr<GeluOp> make_gelu(CudaContext& ctx, const GeluSpec& spec) {
  return std::make_unique<CudaGelu>(ctx, spec);
}

}  // namespace dtrain::cuda
