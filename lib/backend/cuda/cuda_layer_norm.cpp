// Layer normalisation on its own kernels (layer_norm.cu). The column sums of the parameter
// gradients go through partial sums per chunk of rows, in scratch allocated once for the
// spec's rows.
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/sequence_kernels.h"
#include "core/error.h"

namespace dtrain::cuda {
namespace {

class CudaLayerNorm final : public LayerNormOp {
 public:
  CudaLayerNorm(CudaContext& ctx, const LayerNormSpec& spec)
      : ctx_(ctx), spec_(spec), rows_per_chunk_(layer_norm_rows_per_chunk(spec.rows)) {
    DTRAIN_CHECK(spec.rows >= 0 && spec.features > 0)
        << "layer_norm: " << spec.rows << " rows of " << spec.features << " features";
    const int64_t chunks = (spec.rows + rows_per_chunk_ - 1) / rows_per_chunk_;
    if (chunks > 0)
      partials_ = Tensor::empty({2 * chunks * spec.features}, DType::f32, ctx.allocator());
  }
  // x may hold fewer rows than the spec's (a smaller last batch).
  void forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
               const Tensor& mean, const Tensor& rstd) override {
    const int64_t rows = rows_of(x, "layer_norm forward");
    check_device_f32(gamma, spec_.features, "layer_norm forward gamma");
    if (spec_.bias) check_device_f32(beta, spec_.features, "layer_norm forward beta");
    check_device_f32(y, x.numel(), "layer_norm forward y");
    check_device_f32(mean, rows, "layer_norm forward mean");
    check_device_f32(rstd, rows, "layer_norm forward rstd");
    layer_norm_forward_f32(x.data<float>(), gamma.data<float>(),
                           spec_.bias ? beta.data<float>() : nullptr, y.data<float>(),
                           mean.data<float>(), rstd.data<float>(), rows, spec_.features,
                           spec_.epsilon, ctx_.stream());
  }
  void backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                const Tensor& rstd, const Tensor& dx, const Tensor& dgamma,
                const Tensor& dbeta) override {
    const int64_t rows = rows_of(x, "layer_norm backward");
    check_device_f32(dy, x.numel(), "layer_norm backward dy");
    check_device_f32(gamma, spec_.features, "layer_norm backward gamma");
    check_device_f32(mean, rows, "layer_norm backward mean");
    check_device_f32(rstd, rows, "layer_norm backward rstd");
    check_device_f32(dx, x.numel(), "layer_norm backward dx");
    check_device_f32(dgamma, spec_.features, "layer_norm backward dgamma");
    if (spec_.bias) check_device_f32(dbeta, spec_.features, "layer_norm backward dbeta");
    layer_norm_backward_f32(x.data<float>(), dy.data<float>(), gamma.data<float>(),
                            mean.data<float>(), rstd.data<float>(), dx.data<float>(),
                            dgamma.data<float>(), spec_.bias ? dbeta.data<float>() : nullptr, rows,
                            spec_.features, rows_per_chunk_,
                            partials_.defined() ? partials_.data<float>() : nullptr, ctx_.stream());
  }

 private:
  int64_t rows_of(const Tensor& x, const char* what) const {
    check_device_f32(x, 0, what);
    DTRAIN_CHECK(x.numel() % spec_.features == 0 && x.numel() / spec_.features <= spec_.rows)
        << what << ": " << x.shape().str() << " is not rows of " << spec_.features
        << " features, at most " << spec_.rows;
    return x.numel() / spec_.features;
  }

  CudaContext& ctx_;
  LayerNormSpec spec_;
  int64_t rows_per_chunk_;
  Tensor partials_;  // the backward's per-chunk column sums of dgamma and dbeta
};

}  // namespace

std::unique_ptr<LayerNormOp> make_layer_norm(CudaContext& ctx, const LayerNormSpec& spec) {
  return std::make_unique<CudaLayerNorm>(ctx, spec);
}

}  // namespace dtrain::cuda
