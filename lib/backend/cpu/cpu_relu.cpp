// ReLU on oneDNN eltwise primitives; the backward reads the output (use_dst_for_bwd), so the
// input activation need not be kept and the forward may run in place. In bf16 the primitives
// read and write bf16 directly: max(x, 0) and the masked gradient are exact in any dtype.
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"  // DTRAIN_CHECK

namespace dtrain::cpu {
namespace {

class CpuRelu final : public ReluOp {
 public:
  CpuRelu(DnnlContext& ctx, const Shape& shape, DType dtype)
      : eltwise_(ctx, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, true, shape.numel(), "relu",
                 dtype) {}
  void forward(const Tensor& x, const Tensor& y) override { eltwise_.forward(x, y); }
  void backward(const Tensor&, const Tensor& y, const Tensor& dy, const Tensor& dx) override {
    eltwise_.backward(y, dy, dx);
  }

 private:
  DnnlEltwise eltwise_;
};

}  // namespace

std::unique_ptr<ReluOp> make_relu(DnnlContext& ctx, const Shape& shape, DType dtype) {
  DTRAIN_CHECK(dtype == DType::f32 || dtype == DType::bf16)
      << "relu: no " << dtype_name(dtype) << " kernels";
  return std::make_unique<CpuRelu>(ctx, shape, dtype);
}

}  // namespace dtrain::cpu
