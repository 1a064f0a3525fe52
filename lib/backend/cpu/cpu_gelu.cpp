// GELU on oneDNN eltwise primitives: gelu_erf and gelu_tanh are PyTorch's exact and tanh forms,
// forward and backward (which reads the input).
#include "backend/cpu/cpu_ops.h"

namespace dtrain::cpu {
namespace {

class CpuGelu final : public GeluOp {
 public:
  CpuGelu(DnnlContext& ctx, const GeluSpec& spec)
      : eltwise_(ctx,
                 spec.approximate == GeluApproximation::tanh ? dnnl::algorithm::eltwise_gelu_tanh
                                                             : dnnl::algorithm::eltwise_gelu_erf,
                 false, spec.shape.numel(), "gelu") {}
  void forward(const Tensor& x, const Tensor& y) override { eltwise_.forward(x, y); }
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) override {
    eltwise_.backward(x, dy, dx);
  }

 private:
  DnnlEltwise eltwise_;
};

}  // namespace

std::unique_ptr<GeluOp> make_gelu(DnnlContext& ctx, const GeluSpec& spec) {
  return std::make_unique<CpuGelu>(ctx, spec);
}

}  // namespace dtrain::cpu
