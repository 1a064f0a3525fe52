// Conv2d on cuDNN (NCHW, OIHW, cross-correlation as in PyTorch). Each pass gets the fastest
// algorithm that cudnnFind* measures for this shape when the op is built, on a convolution
// descriptor of its own: the math type is part of the algorithm choice (the Find results name
// the math type each time was measured with); DTRAIN_CONV_ALGO=direct leaves out the FFT and
// non-fused Winograd ones (see `transforms`). Bias and the fused ReLU are one epilogue kernel
// after the forward; the backward passes read the gradient masked into a scratch tensor.
#include <algorithm>  // max, min
#include <cstdlib>    // getenv: DTRAIN_CONV_ALGO
#include <memory>
#include <string_view>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cudnn_descriptors.h"  // descriptor handles, nchw_desc
#include "backend/cuda/kernels.h"            // bias_relu_f32, relu_backward_f32
#include "core/error.h"

namespace dtrain::cuda {
namespace {

int dnn_int(int64_t v) {
  return cuda::dnn_int(v, "conv");
}
TensorDesc nchw_desc(int64_t n, int64_t c, int64_t h, int64_t w) {
  return cuda::nchw_desc(n, c, h, w, "conv");
}

ConvDesc conv_desc(const ConvSpec& s, cudnnMathType_t math) {
  cudnnConvolutionDescriptor_t d = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
  ConvDesc owned(d);
  // Cross-correlation is what PyTorch and oneDNN call convolution; fp32 accumulation.
  DTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, dnn_int(s.pad_h), dnn_int(s.pad_w),
                                                     dnn_int(s.stride_h), dnn_int(s.stride_w), 1, 1,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(d, math));
  return owned;
}

// The most workspace one pass may ask for: the workspace is shared by all ops and grows to
// their largest need, so one greedy algorithm must not take the memory the activations need.
size_t workspace_limit() {
  constexpr size_t kCap = size_t{1} << 30;
  size_t free_bytes = 0, total_bytes = 0;
  DTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return std::min(kCap, free_bytes / 4);
}

// The algorithms that compute in a transformed domain (FFT, non-fused Winograd). Their rounding
// is far above the direct ones': on an H200 (cuDNN 9.19), AlexNet's 5x5 64->192 convolution
// through non-fused Winograd or FFT was 4e-3 to 1.2e-2 off (relative to the largest output),
// through the GEMM algorithms 1e-6. They are also much faster (ResNet-18 training 1.6x), and
// PyTorch takes them with TF32 off too, so they are allowed unless DTRAIN_CONV_ALGO=direct.
bool transforms(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool transforms(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool transforms(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

bool direct_only() {
  const char* forced = std::getenv("DTRAIN_CONV_ALGO");
  return forced != nullptr && std::string_view(forced) == "direct";
}

// The fastest measured algorithm that ran and fits `limit` (cudnnFind* lists its results
// fastest first), not a transform one when `direct`. With strict fp32 the descriptor keeps
// CUDNN_FMA_MATH whatever math type a result reports (as PyTorch does), so no algorithm may use
// TF32.
template <typename Perf>
Perf fastest(const std::vector<Perf>& perfs, int count, size_t limit, bool strict, bool direct,
             const char* pass, const ConvSpec& s) {
  for (int i = 0; i < count; ++i) {
    Perf p = perfs[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > limit) continue;
    if (direct && transforms(p.algo)) continue;
    if (strict) p.mathType = CUDNN_FMA_MATH;
    return p;
  }
  DTRAIN_CHECK(false) << "conv " << pass << ": cuDNN has no usable algorithm for input "
                      << s.input_shape().str() << ", weights " << s.weight_shape().str()
                      << " within " << limit << " bytes of workspace";
  return perfs.front();  // unreachable
}

class CudaConv final : public ConvOp {
 public:
  CudaConv(CudaContext& ctx, const ConvSpec& s) : ctx_(ctx), spec_(s) {
    DTRAIN_CHECK(s.batch > 0 && s.out_height() > 0 && s.out_width() > 0)
        << "conv output would be empty for input " << s.input_shape().str();
    x_ = nchw_desc(s.batch, s.in_channels, s.height, s.width);
    y_ = nchw_desc(s.batch, s.out_channels, s.out_height(), s.out_width());
    bias_ = nchw_desc(1, s.out_channels, 1, 1);
    cudnnFilterDescriptor_t w = nullptr;
    DTRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    w_.reset(w);
    DTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                  dnn_int(s.out_channels), dnn_int(s.in_channels),
                                                  dnn_int(s.kernel_h), dnn_int(s.kernel_w)));
    fwd_conv_ = conv_desc(s, ctx.conv_math());
    bwd_data_conv_ = conv_desc(s, ctx.conv_math());
    bwd_filter_conv_ = conv_desc(s, ctx.conv_math());
    int n = 0, c = 0, h = 0, wd = 0;
    DTRAIN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(fwd_conv_.get(), x_.get(), w_.get(),
                                                             &n, &c, &h, &wd));
    DTRAIN_CHECK(n == s.batch && c == s.out_channels && h == s.out_height() && wd == s.out_width())
        << "conv: cuDNN's output " << n << "x" << c << "x" << h << "x" << wd << " differs from "
        << s.output_shape().str();
    choose_algorithms();
    if (s.relu) masked_ = Tensor::empty(s.output_shape(), DType::f32, ctx.allocator());
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    check(x, spec_.input_shape(), "x");
    check(w, spec_.weight_shape(), "w");
    check(y, spec_.output_shape(), "y");
    if (spec_.bias) check(b, {spec_.out_channels}, "b");
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUDNN_CHECK(cudnnConvolutionForward(
        ctx_.cudnn(), &one, x_.get(), x.data<float>(), w_.get(), w.data<float>(), fwd_conv_.get(),
        fwd_algo_, ctx_.workspace(), ctx_.workspace_bytes(), &zero, y_.get(), y.data<float>()));
    bias_relu_f32(y.data<float>(), spec_.bias ? b.data<float>() : nullptr, y.data<float>(),
                  y.numel(), spec_.out_channels, spec_.out_height() * spec_.out_width(), spec_.relu,
                  ctx_.stream());
  }

  void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                     const Tensor& dx) override {
    check(w, spec_.weight_shape(), "w");
    check(dx, spec_.input_shape(), "dx");
    const float* g = masked(y, dy);
    const float one = 1.0f, zero = 0.0f;
    DTRAIN_CUDNN_CHECK(
        cudnnConvolutionBackwardData(ctx_.cudnn(), &one, w_.get(), w.data<float>(), y_.get(), g,
                                     bwd_data_conv_.get(), bwd_data_algo_, ctx_.workspace(),
                                     ctx_.workspace_bytes(), &zero, x_.get(), dx.data<float>()));
  }

  void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dw,
                        const Tensor& db) override {
    check(x, spec_.input_shape(), "x");
    check(dw, spec_.weight_shape(), "dw");
    if (spec_.bias) check(db, {spec_.out_channels}, "db");
    const float* g = masked(y, dy);
    const float one = 1.0f, zero = 0.0f;  // beta = 0: overwrite
    DTRAIN_CUDNN_CHECK(
        cudnnConvolutionBackwardFilter(ctx_.cudnn(), &one, x_.get(), x.data<float>(), y_.get(), g,
                                       bwd_filter_conv_.get(), bwd_filter_algo_, ctx_.workspace(),
                                       ctx_.workspace_bytes(), &zero, w_.get(), dw.data<float>()));
    if (spec_.bias) {
      DTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardBias(ctx_.cudnn(), &one, y_.get(), g, &zero,
                                                      bias_.get(), db.data<float>()));
    }
  }

 private:
  // Measures every algorithm of each pass (cudnnFind* allocates its own buffers), keeps the
  // fastest, and grows the shared workspace to what the three chosen ones need.
  void choose_algorithms() {
    cudnnHandle_t handle = ctx_.cudnn();
    const size_t limit = workspace_limit();
    const bool strict = ctx_.conv_math() == CUDNN_FMA_MATH, direct = direct_only();
    size_t need = 0;
    int max_count = 0, count = 0;

    DTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(static_cast<size_t>(std::max(max_count, 1)));
    DTRAIN_CUDNN_CHECK(
        cudnnFindConvolutionForwardAlgorithm(handle, x_.get(), w_.get(), fwd_conv_.get(), y_.get(),
                                             static_cast<int>(fwd.size()), &count, fwd.data()));
    const auto f = fastest(fwd, count, limit, strict, direct, "forward", spec_);
    fwd_algo_ = f.algo;
    DTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(fwd_conv_.get(), f.mathType));
    size_t bytes = 0;
    DTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
        handle, x_.get(), w_.get(), fwd_conv_.get(), y_.get(), fwd_algo_, &bytes));
    need = std::max({need, f.memory, bytes});

    DTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bd(static_cast<size_t>(std::max(max_count, 1)));
    DTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(
        handle, w_.get(), y_.get(), bwd_data_conv_.get(), x_.get(), static_cast<int>(bd.size()),
        &count, bd.data()));
    const auto d = fastest(bd, count, limit, strict, direct, "backward data", spec_);
    bwd_data_algo_ = d.algo;
    DTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(bwd_data_conv_.get(), d.mathType));
    DTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        handle, w_.get(), y_.get(), bwd_data_conv_.get(), x_.get(), bwd_data_algo_, &bytes));
    need = std::max({need, d.memory, bytes});

    DTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bf(
        static_cast<size_t>(std::max(max_count, 1)));
    DTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
        handle, x_.get(), y_.get(), bwd_filter_conv_.get(), w_.get(), static_cast<int>(bf.size()),
        &count, bf.data()));
    const auto wf = fastest(bf, count, limit, strict, direct, "backward filter", spec_);
    bwd_filter_algo_ = wf.algo;
    DTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(bwd_filter_conv_.get(), wf.mathType));
    DTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        handle, x_.get(), y_.get(), bwd_filter_conv_.get(), w_.get(), bwd_filter_algo_, &bytes));
    need = std::max({need, wf.memory, bytes});

    ctx_.reserve_workspace(need);
  }

  static void check(const Tensor& t, const Shape& shape, const char* what) {
    DTRAIN_CHECK(t.numel() == shape.numel())
        << "conv " << what << ": " << t.shape().str() << ", expected " << shape.str()
        << " (plans are per batch size)";
    check_device_f32(t, shape.numel(), "conv");
  }

  // dy as cuDNN must see it: masked by the fused ReLU's output.
  const float* masked(const Tensor& y, const Tensor& dy) {
    check(dy, spec_.output_shape(), "dy");
    if (!spec_.relu) return dy.data<float>();
    check(y, spec_.output_shape(), "y");
    relu_backward_f32(y.data<float>(), dy.data<float>(), masked_.data<float>(), dy.numel(),
                      ctx_.stream());
    return masked_.data<float>();
  }

  CudaContext& ctx_;
  ConvSpec spec_;
  TensorDesc x_, y_, bias_;
  FilterDesc w_;
  ConvDesc fwd_conv_, bwd_data_conv_, bwd_filter_conv_;  // one per pass: math types may differ
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  Tensor masked_;  // the masked gradient (fused ReLU)
};

}  // namespace

std::unique_ptr<ConvOp> make_conv(CudaContext& ctx, const ConvSpec& spec) {
  return std::make_unique<CudaConv>(ctx, spec);
}

}  // namespace dtrain::cuda
