// Cross-channel local response normalisation (AlexNet) on cuDNN, plain NCHW.
// cuDNN divides lrnAlpha by the window size inside the library, so its formula is PyTorch's
// (and oneDNN's, the CPU reference): y = x / (k + α/n · Σ x²)^β, and α is passed unchanged.
// Its window is [c − ⌊(n−1)/2⌋, c + n − 1 − ⌊(n−1)/2⌋], PyTorch's [c − ⌊n/2⌋, c + ⌊(n−1)/2⌋]:
// the same for odd n only, so even sizes are refused rather than computed differently.
// The backward re-reads x and y, so no workspace.
#include <memory>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cudnn_descriptors.h"  // descriptor handles, nchw_desc
#include "core/error.h"

namespace dtrain::cuda {
namespace {

class CudaLrn final : public LrnOp {
 public:
  CudaLrn(CudaContext& ctx, const LrnSpec& s) : ctx_(ctx), shape_(s.shape()) {
    DTRAIN_CHECK(s.size % 2 == 1 && s.size >= CUDNN_LRN_MIN_N && s.size <= CUDNN_LRN_MAX_N)
        << "lrn: size " << s.size << " is not supported on CUDA (odd sizes " << CUDNN_LRN_MIN_N
        << " to " << CUDNN_LRN_MAX_N << ")";
    DTRAIN_CHECK(s.k >= CUDNN_LRN_MIN_K && s.beta >= CUDNN_LRN_MIN_BETA)
        << "lrn: cuDNN needs k >= " << CUDNN_LRN_MIN_K << " and beta >= " << CUDNN_LRN_MIN_BETA
        << ", got k = " << s.k << ", beta = " << s.beta;
    desc_ = cuda::nchw_desc(s.batch, s.channels, s.height, s.width, "lrn");
    cudnnLRNDescriptor_t l = nullptr;
    DTRAIN_CUDNN_CHECK(cudnnCreateLRNDescriptor(&l));
    lrn_.reset(l);
    DTRAIN_CUDNN_CHECK(
        cudnnSetLRNDescriptor(l, static_cast<unsigned>(s.size), s.alpha, s.beta, s.k));
  }

  size_t workspace_bytes() const override { return 0; }

  void forward(const Tensor& x, const Tensor& y, const Tensor&, bool) override {
    check(x, "x");
    check(y, "y");
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUDNN_CHECK(cudnnLRNCrossChannelForward(
        ctx_.cudnn(), lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, desc_.get(), x.data<float>(),
        &zero, desc_.get(), y.data<float>()));
  }

  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor&,
                const Tensor& dx) override {
    check(x, "x");
    check(y, "y");
    check(dy, "dy");
    check(dx, "dx");
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUDNN_CHECK(cudnnLRNCrossChannelBackward(
        ctx_.cudnn(), lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, desc_.get(), y.data<float>(),
        desc_.get(), dy.data<float>(), desc_.get(), x.data<float>(), &zero, desc_.get(),
        dx.data<float>()));
  }

 private:
  void check(const Tensor& t, const char* what) const {
    DTRAIN_CHECK(t.numel() == shape_.numel())
        << "lrn " << what << ": " << t.shape().str() << ", expected " << shape_.str()
        << " (plans are per batch size)";
    check_device_f32(t, shape_.numel(), "lrn");
  }

  CudaContext& ctx_;
  Shape shape_;
  TensorDesc desc_;  // x, y, dy and dx share it
  LrnDesc lrn_;
};

}  // namespace

std::unique_ptr<LrnOp> make_lrn(CudaContext& ctx, const LrnSpec& spec) {
  return std::make_unique<CudaLrn>(ctx, spec);
}

}  // namespace dtrain::cuda
