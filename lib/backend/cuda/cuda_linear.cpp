// Linear on cuBLAS. cuBLAS is column-major: a row-major [r, c] tensor is, to cuBLAS, its
// transpose, the [c, r] matrix with leading dimension c. So each product is computed
// transposed, on the same memory:
//   y = x·wᵀ   as  yᵀ  = w·xᵀ    gemm(T, N)  m = out, n = N,   k = in    A = w, B = x
//   dx = dy·w  as  dxᵀ = wᵀ·dyᵀ  gemm(N, N)  m = in,  n = N,   k = out   A = w, B = dy
//   dw = dyᵀ·x as  dwᵀ = xᵀ·dy   gemm(N, T)  m = in,  n = out, k = N     A = x, B = dy
// (cuBLAS sees w as wᵀ, x as xᵀ, dy as dyᵀ; every leading dimension is the tensor's row
// length). The bias gradient, the column sums of dy, is the GEMV dyᵀ·ones. Bias and the
// fused ReLU are one epilogue kernel after the forward GEMM.
//
// In bf16 (spec.dtype) x, y, dy and dx are bf16 (CUDA_R_16BF) and every GEMM is cublasGemmEx
// with CUBLAS_COMPUTE_32F: bf16 products accumulated in f32, as oneDNN's bf16 inner products on
// the CPU. The f32 master weights are converted into the op's bf16 copy on every forward and
// data-gradient call (the caller may bind other weights between calls). With a bias or ReLU the
// forward GEMM writes f32 into the shared workspace and the epilogue adds the bias, applies the
// ReLU and rounds once into y; without them cuBLAS rounds y once itself, as it rounds dx
// (split-K reductions kept in f32, see `F32Reductions`); dw and db are written in f32 straight from
// the bf16 x and dy (db as the GEMM dyᵀ·ones with bf16 ones, accumulated in f32).
#include <cstdint>  // uint16_t: bf16 bits
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernels.h"  // bias_relu_f32, relu_backward_f32, bf16 helpers
#include "core/error.h"

namespace dtrain::cuda {
namespace {

int blas_int(int64_t v, const char* what) {
  DTRAIN_CHECK(v > 0 && v <= std::numeric_limits<int>::max())
      << "linear: " << what << " = " << v << " does not fit cuBLAS's int sizes";
  return static_cast<int>(v);
}

// Forbids cuBLAS's reduced-precision split-K reductions (partial sums in bf16) on the shared
// handle for one bf16 GEMM, so each stored value is rounded once from f32; restores the mode.
class F32Reductions {
 public:
  explicit F32Reductions(cublasHandle_t h) : h_(h) {
    DTRAIN_CUBLAS_CHECK(cublasGetMathMode(h_, &saved_));
    DTRAIN_CUBLAS_CHECK(cublasSetMathMode(
        h_, static_cast<cublasMath_t>(saved_ | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  }
  ~F32Reductions() { cublasSetMathMode(h_, saved_); }
  F32Reductions(const F32Reductions&) = delete;
  F32Reductions& operator=(const F32Reductions&) = delete;

 private:
  cublasHandle_t h_;
  cublasMath_t saved_{};
};

// C = op(A)·op(B) with bf16 A and B, f32 accumulation, C in `c_type` (bf16 or f32), beta = 0
// (cuBLAS then never reads C).
void gemm_bf16(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
               const void* a, int lda, const void* b, int ldb, void* c, cudaDataType c_type,
               int ldc) {
  const float one = 1.0f, zero = 0.0f;
  F32Reductions f32_reductions(h);
  DTRAIN_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &one, a, CUDA_R_16BF, lda, b, CUDA_R_16BF,
                                   ldb, &zero, c, c_type, ldc, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

class CudaLinear final : public LinearOp {
 public:
  CudaLinear(CudaContext& ctx, const LinearSpec& s)
      : ctx_(ctx),
        spec_(s),
        batch_(blas_int(s.batch, "batch")),
        in_(blas_int(s.in_features, "in_features")),
        out_(blas_int(s.out_features, "out_features")) {
    DTRAIN_CHECK(s.dtype == DType::f32 || s.dtype == DType::bf16)
        << "linear: activations must be f32 or bf16, got " << dtype_name(s.dtype);
    // Grown now, while nothing is in flight; the iterations only read them.
    if (s.relu) masked_ = Tensor::empty({s.batch, s.out_features}, s.dtype, ctx.allocator());
    if (s.dtype == DType::f32) {
      if (s.bias) ctx.ones(s.batch);
      return;
    }
    w16_ = Tensor::empty({s.out_features, s.in_features}, DType::bf16, ctx.allocator());
    if (s.bias) {
      ones16_ = Tensor::empty({s.batch}, DType::bf16, ctx.allocator());
      fill_bf16(ones16_.data<uint16_t>(), s.batch, 1.0f, ctx.stream());
    }
    // The forward's f32 product before its one rounding, where an epilogue follows the GEMM.
    // Without one cuBLAS rounds once into y itself: a language model's head (no bias) would
    // otherwise hold an f32 copy of all its logits (GPT-2 at 8×1024 tokens: 1.6 GB).
    if (epilogue())
      ctx.reserve_workspace(static_cast<size_t>(s.batch * s.out_features) * sizeof(float));
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    check(x, spec_.batch * spec_.in_features, "x");
    check_f32(w, spec_.out_features * spec_.in_features, "w");
    check(y, spec_.batch * spec_.out_features, "y");
    if (spec_.bias) check_f32(b, spec_.out_features, "b");
    if (spec_.dtype == DType::bf16 && !epilogue()) {
      gemm_bf16(ctx_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, batch_, in_, weights_bf16(w), in_,
                x.raw(), in_, y.raw(), CUDA_R_16BF, out_);
      return;
    }
    if (spec_.dtype == DType::bf16) {
      auto* product = static_cast<float*>(ctx_.workspace());
      gemm_bf16(ctx_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, batch_, in_, weights_bf16(w), in_,
                x.raw(), in_, product, CUDA_R_32F, out_);
      bias_relu_to_bf16(product, spec_.bias ? b.data<float>() : nullptr, y.data<uint16_t>(),
                        y.numel(), spec_.out_features, 1, spec_.relu, ctx_.stream());
      return;
    }
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUBLAS_CHECK(cublasSgemm(ctx_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, batch_, in_,
                                    &one, w.data<float>(), in_, x.data<float>(), in_, &zero,
                                    y.data<float>(), out_));
    bias_relu_f32(y.data<float>(), spec_.bias ? b.data<float>() : nullptr, y.data<float>(),
                  y.numel(), spec_.out_features, 1, spec_.relu, ctx_.stream());
  }

  void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                     const Tensor& dx) override {
    check_f32(w, spec_.out_features * spec_.in_features, "w");
    check(dx, spec_.batch * spec_.in_features, "dx");
    if (spec_.dtype == DType::bf16) {
      gemm_bf16(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, batch_, out_, weights_bf16(w), in_,
                masked(y, dy), out_, dx.raw(), CUDA_R_16BF, in_);
      return;
    }
    const float* g = masked_f32(y, dy);
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUBLAS_CHECK(cublasSgemm(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, batch_, out_,
                                    &one, w.data<float>(), in_, g, out_, &zero, dx.data<float>(),
                                    in_));
  }

  void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dw,
                        const Tensor& db) override {
    check(x, spec_.batch * spec_.in_features, "x");
    check_f32(dw, spec_.out_features * spec_.in_features, "dw");
    if (spec_.bias) check_f32(db, spec_.out_features, "db");
    if (spec_.dtype == DType::bf16) {
      const void* g = masked(y, dy);
      gemm_bf16(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, batch_, x.raw(), in_, g, out_,
                dw.raw(), CUDA_R_32F, in_);
      if (spec_.bias) {
        gemm_bf16(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, out_, 1, batch_, g, out_, ones16_.raw(),
                  batch_, db.raw(), CUDA_R_32F, out_);
      }
      return;
    }
    const float* g = masked_f32(y, dy);
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
  // An activation or its gradient: in the spec's dtype.
  void check(const Tensor& t, int64_t numel, const char* what) const {
    check_count(t, numel, what);
    DTRAIN_CHECK(t.device() == Device::cuda && t.dtype() == spec_.dtype)
        << "linear " << what << ": expected a " << dtype_name(spec_.dtype)
        << " tensor on the GPU, got " << dtype_name(t.dtype()) << " on " << device_name(t.device());
  }
  // Weights, bias and their gradients: f32 whatever the activations' dtype.
  static void check_f32(const Tensor& t, int64_t numel, const char* what) {
    check_count(t, numel, what);
    check_device_f32(t, numel, "linear");
  }
  static void check_count(const Tensor& t, int64_t numel, const char* what) {
    DTRAIN_CHECK(t.numel() == numel) << "linear " << what << ": " << t.shape().str() << " has "
                                     << t.numel() << " elements, expected " << numel;
  }

  // dy as the GEMMs must see it: masked by the fused ReLU's output (in the spec's dtype).
  const void* masked(const Tensor& y, const Tensor& dy) {
    check(dy, spec_.batch * spec_.out_features, "dy");
    if (!spec_.relu) return dy.raw();
    check(y, spec_.batch * spec_.out_features, "y");
    if (spec_.dtype == DType::bf16)
      relu_backward_bf16(y.data<uint16_t>(), dy.data<uint16_t>(), masked_.data<uint16_t>(),
                         dy.numel(), ctx_.stream());
    else
      relu_backward_f32(y.data<float>(), dy.data<float>(), masked_.data<float>(), dy.numel(),
                        ctx_.stream());
    return masked_.raw();
  }
  const float* masked_f32(const Tensor& y, const Tensor& dy) {
    return static_cast<const float*>(masked(y, dy));
  }

  // Whether the forward has a bias or ReLU to apply after its GEMM.
  bool epilogue() const { return spec_.bias || spec_.relu; }

  // The f32 master weights converted into the op's bf16 copy, on every call that reads them.
  const void* weights_bf16(const Tensor& w) {
    f32_to_bf16(w.data<float>(), w16_.data<uint16_t>(), w16_.numel(), ctx_.stream());
    return w16_.raw();
  }

  CudaContext& ctx_;
  LinearSpec spec_;
  int batch_, in_, out_;
  Tensor masked_;  // the masked gradient (fused ReLU), in the spec's dtype
  Tensor w16_;     // bf16: the weights converted on each call
  Tensor ones16_;  // bf16 with bias: the bias gradient's ones
};

}  // namespace

std::unique_ptr<LinearOp> make_linear(CudaContext& ctx, const LinearSpec& spec) {
  return std::make_unique<CudaLinear>(ctx, spec);
}

}  // namespace dtrain::cuda
