// Linear on cuBLAS. cuBLAS is column-major: a row-major [r, c] tensor is, to cuBLAS, its
// transpose, the [c, r] matrix with leading dimension c. So each product is computed
// transposed, on the same memory:
//   y = x·wᵀ   as  yᵀ  = w·xᵀ    gemm(T, N)  m = out, n = N,   k = in    A = w, B = x
//   dx = dy·w  as  dxᵀ = wᵀ·dyᵀ  gemm(N, N)  m = in,  n = N,   k = out   A = w, B = dy
//   dw = dyᵀ·x as  dwᵀ = xᵀ·dy   gemm(N, T)  m = in,  n = out, k = N     A = x, B = dy
// (cuBLAS sees w as wᵀ, x as xᵀ, dy as dyᵀ; every leading dimension is the tensor's row
// length). The bias gradient, the column sums of dy, is the GEMV dyᵀ·ones. Bias and the
// fused ReLU are one epilogue kernel after the forward GEMM.
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernels.h"  // bias_relu_f32, relu_backward_f32
#include "core/error.h"

namespace dtrain::cuda {
namespace {

int blas_int(int64_t v, const char* what) {
  DTRAIN_CHECK(v > 0 && v <= std::numeric_limits<int>::max())
      << "linear: " << what << " = " << v << " does not fit cuBLAS's int sizes";
  return static_cast<int>(v);
}

class CudaLinear final : public LinearOp {
 public:
  CudaLinear(CudaContext& ctx, const LinearSpec& s)
      : ctx_(ctx),
        spec_(s),
        batch_(blas_int(s.batch, "batch")),
        in_(blas_int(s.in_features, "in_features")),
        out_(blas_int(s.out_features, "out_features")) {
    // Grown now, while nothing is in flight; the iterations only read them.
    if (s.bias) ctx.ones(s.batch);
    if (s.relu) masked_ = Tensor::empty({s.batch, s.out_features}, DType::f32, ctx.allocator());
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    check(x, spec_.batch * spec_.in_features, "x");
    check(w, spec_.out_features * spec_.in_features, "w");
    check(y, spec_.batch * spec_.out_features, "y");
    if (spec_.bias) check(b, spec_.out_features, "b");
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUBLAS_CHECK(cublasSgemm(ctx_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, batch_, in_,
                                    &one, w.data<float>(), in_, x.data<float>(), in_, &zero,
                                    y.data<float>(), out_));
    bias_relu_f32(y.data<float>(), spec_.bias ? b.data<float>() : nullptr, y.data<float>(),
                  y.numel(), spec_.out_features, 1, spec_.relu, ctx_.stream());
  }

  void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                     const Tensor& dx) override {
    check(w, spec_.out_features * spec_.in_features, "w");
    check(dx, spec_.batch * spec_.in_features, "dx");
    const float* g = masked(y, dy);
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUBLAS_CHECK(cublasSgemm(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, batch_, out_,
                                    &one, w.data<float>(), in_, g, out_, &zero, dx.data<float>(),
                                    in_));
  }

  void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dw,
                        const Tensor& db) override {
    check(x, spec_.batch * spec_.in_features, "x");
    check(dw, spec_.out_features * spec_.in_features, "dw");
    if (spec_.bias) check(db, spec_.out_features, "db");
    const float* g = masked(y, dy);
    const float one = 1.0f, zero = 0.0f;
    // beta = 0: cuBLAS then never reads dw/db, so stale or NaN contents cannot leak in.
    DTRAIN_CUBLAS_CHECK(cublasSgemm(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, batch_,
                                    &one, x.data<float>(), in_, g, out_, &zero, dw.data<float>(),
                                    in_));
    if (spec_.bias) {
      DTRAIN_CUBLAS_CHECK(cublasSgemv(ctx_.cublas(), CUBLAS_OP_N, out_, batch_, &one, g, out_,
                                      ctx_.ones(spec_.batch), 1, &zero, db.data<float>(), 1));
    }
  }

 private:
  // Plans are per batch size (the layers keep one per size), so every call has spec_.batch rows.
  static void check(const Tensor& t, int64_t numel, const char* what) {
    DTRAIN_CHECK(t.numel() == numel) << "linear " << what << ": " << t.shape().str() << " has "
                                     << t.numel() << " elements, expected " << numel;
    check_device_f32(t, numel, "linear");
  }

  // dy as the GEMMs must see it: masked by the fused ReLU's output.
  const float* masked(const Tensor& y, const Tensor& dy) {
    check(dy, spec_.batch * spec_.out_features, "dy");
    if (!spec_.relu) return dy.data<float>();
    check(y, spec_.batch * spec_.out_features, "y");
    relu_backward_f32(y.data<float>(), dy.data<float>(), masked_.data<float>(), dy.numel(),
                      ctx_.stream());
    return masked_.data<float>();
  }

  CudaContext& ctx_;
  LinearSpec spec_;
  int batch_, in_, out_;
  Tensor masked_;  // the masked gradient (fused ReLU)
};

}  // namespace

std::unique_ptr<LinearOp> make_linear(CudaContext& ctx, const LinearSpec& spec) {
  return std::make_unique<CudaLinear>(ctx, spec);
}

}  // namespace dtrain::cuda
