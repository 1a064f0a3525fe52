// Conv2d on cuDNN (NCHW, OIHW, cross-correlation as in PyTorch). Each pass gets the fastest
// algorithm that cudnnFind* measures for this shape when the op is built, on a convolution
// descriptor of its own: the math type is part of the algorithm choice (the Find results name
// the math type each time was measured with); DTRAIN_CONV_ALGO=direct leaves out the FFT and
// non-fused Winograd ones (see `transforms`). Bias and the fused ReLU are one epilogue kernel
// after the forward; the backward passes read the gradient masked into a scratch tensor.
//
// In bf16 (spec.dtype) x, y, dy and dx are bf16 NCHW tensors (CUDNN_DATA_BFLOAT16) and the
// convolution descriptors compute in f32 (CUDNN_DATA_FLOAT, cuDNN's pseudo-bf16 configuration):
// the forward and the data gradient read the f32 master weights converted into the op's bf16
// copy on every call (the caller may bind other weights between calls). cuDNN's legacy API
// computes the filter gradient in x's type only (no bf16 x and dy with an f32 dw), and a bf16 dw
// would round every weight gradient to 8 bits before the optimizer sees it. So the weight
// gradient widens x and the masked dy exactly into f32 copies in the shared workspace and runs
// the f32 backward-filter (and backward-bias) on them: the same bf16 products accumulated in
// f32 that oneDNN's bf16 weight gradient computes on the CPU, written straight into the f32
// OIHW dw. Its algorithm may use TF32 tensor cores even without cluster.tf32: a bf16 value is
// exact in TF32, so TF32 changes nothing here. The price is one f32 copy of x and dy per call
// (workspace, shared by all ops) and an f32-speed filter pass.
// The bias after a bf16 forward is added to cuDNN's rounded bf16 output and rounded again (the
// CPU adds it before its one rounding): up to one more bf16 rounding of y where there is a bias.
#include <algorithm>  // max, min
#include <cstdint>    // uint16_t: bf16 bits
#include <cstdlib>    // getenv: DTRAIN_CONV_ALGO
#include <memory>
#include <string_view>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cudnn_descriptors.h"  // descriptor handles, nchw_desc
#include "backend/cuda/kernels.h"            // bias_relu_f32, relu_backward_f32, bf16 helpers
#include "core/error.h"

namespace dtrain::cuda {
namespace {

int dnn_int(int64_t v) {
  return cuda::dnn_int(v, "conv");
}
TensorDesc nchw_desc(int64_t n, int64_t c, int64_t h, int64_t w,
                     cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  return cuda::nchw_desc(n, c, h, w, "conv", type);
}
FilterDesc filter_desc(const ConvSpec& s, cudnnDataType_t type) {
  return oihw_filter_desc(s.out_channels, s.in_channels, s.kernel_h, s.kernel_w, "conv", type);
}

// Byte offsets into the workspace, aligned for any element type and cuDNN's own buffers.
size_t aligned(size_t bytes) {
  constexpr size_t kAlign = 256;
  return (bytes + kAlign - 1) / kAlign * kAlign;
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
    const cudnnDataType_t type = cudnn_type(s.dtype, "conv");
    x_ = nchw_desc(s.batch, s.in_channels, s.height, s.width, type);
    y_ = nchw_desc(s.batch, s.out_channels, s.out_height(), s.out_width(), type);
    bias_ = nchw_desc(1, s.out_channels, 1, 1);
    w_ = filter_desc(s, type);
    // bf16 data needs tensor cores (their math type is what cudnnFind then reports); the f32
    // filter pass of bf16 reads bf16-exact values, which TF32 keeps exactly (see the top).
    const cudnnMathType_t math = bf16() ? CUDNN_TENSOR_OP_MATH : ctx.conv_math();
    fwd_conv_ = conv_desc(s, math);
    bwd_data_conv_ = conv_desc(s, math);
    bwd_filter_conv_ = conv_desc(s, bf16() ? CUDNN_DEFAULT_MATH : ctx.conv_math());
    if (bf16()) {
      x32_ = nchw_desc(s.batch, s.in_channels, s.height, s.width);
      y32_ = nchw_desc(s.batch, s.out_channels, s.out_height(), s.out_width());
      w32_ = filter_desc(s, CUDNN_DATA_FLOAT);
      w16_ = Tensor::empty(s.weight_shape(), DType::bf16, ctx.allocator());
    }
    int n = 0, c = 0, h = 0, wd = 0;
    DTRAIN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(fwd_conv_.get(), x_.get(), w_.get(),
                                                             &n, &c, &h, &wd));
    DTRAIN_CHECK(n == s.batch && c == s.out_channels && h == s.out_height() && wd == s.out_width())
        << "conv: cuDNN's output " << n << "x" << c << "x" << h << "x" << wd << " differs from "
        << s.output_shape().str();
    choose_algorithms();
    if (s.relu) masked_ = Tensor::empty(s.output_shape(), s.dtype, ctx.allocator());
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    check(x, spec_.input_shape(), "x");
    check_f32(w, spec_.weight_shape(), "w");
    check(y, spec_.output_shape(), "y");
    if (spec_.bias) check_f32(b, {spec_.out_channels}, "b");
    const float one = 1.0f, zero = 0.0f;
    if (bf16()) {
      DTRAIN_CUDNN_CHECK(cudnnConvolutionForward(
          ctx_.cudnn(), &one, x_.get(), x.raw(), w_.get(), weights_bf16(w), fwd_conv_.get(),
          fwd_algo_, ctx_.workspace(), ctx_.workspace_bytes(), &zero, y_.get(), y.raw()));
      bias_relu_bf16(y.data<uint16_t>(), spec_.bias ? b.data<float>() : nullptr, y.data<uint16_t>(),
                     y.numel(), spec_.out_channels, spec_.out_height() * spec_.out_width(),
                     spec_.relu, ctx_.stream());
      return;
    }
    DTRAIN_CUDNN_CHECK(cudnnConvolutionForward(
        ctx_.cudnn(), &one, x_.get(), x.data<float>(), w_.get(), w.data<float>(), fwd_conv_.get(),
        fwd_algo_, ctx_.workspace(), ctx_.workspace_bytes(), &zero, y_.get(), y.data<float>()));
    bias_relu_f32(y.data<float>(), spec_.bias ? b.data<float>() : nullptr, y.data<float>(),
                  y.numel(), spec_.out_channels, spec_.out_height() * spec_.out_width(), spec_.relu,
                  ctx_.stream());
  }

  void backward_data(const Tensor& y, const Tensor& dy, const Tensor& w,
                     const Tensor& dx) override {
    check_f32(w, spec_.weight_shape(), "w");
    check(dx, spec_.input_shape(), "dx");
    const void* g = masked(y, dy);
    const float one = 1.0f, zero = 0.0f;
    const void* weights = bf16() ? weights_bf16(w) : w.raw();
    DTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(
        ctx_.cudnn(), &one, w_.get(), weights, y_.get(), g, bwd_data_conv_.get(), bwd_data_algo_,
        ctx_.workspace(), ctx_.workspace_bytes(), &zero, x_.get(), dx.raw()));
  }

  void backward_weights(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dw,
                        const Tensor& db) override {
    check(x, spec_.input_shape(), "x");
    check_f32(dw, spec_.weight_shape(), "dw");
    if (spec_.bias) check_f32(db, {spec_.out_channels}, "db");
    const void* g = masked(y, dy);
    const void* xs = x.raw();
    cudnnTensorDescriptor_t x_desc = x_.get(), y_desc = y_.get();
    cudnnFilterDescriptor_t w_desc = w_.get();
    auto* workspace = static_cast<char*>(ctx_.workspace());
    size_t workspace_bytes = ctx_.workspace_bytes();
    if (bf16()) {  // f32 copies of x and the masked dy, then the f32 passes (see the top)
      auto* x32 = reinterpret_cast<float*>(workspace);
      auto* g32 = reinterpret_cast<float*>(workspace + copy_bytes(x.numel()));
      const size_t copies = copy_bytes(x.numel()) + copy_bytes(dy.numel());
      bf16_to_f32(x.data<uint16_t>(), x32, x.numel(), ctx_.stream());
      bf16_to_f32(static_cast<const uint16_t*>(g), g32, dy.numel(), ctx_.stream());
      xs = x32;
      g = g32;
      x_desc = x32_.get();
      y_desc = y32_.get();
      w_desc = w32_.get();
      workspace += copies;
      workspace_bytes -= copies;
    }
    const float one = 1.0f, zero = 0.0f;  // beta = 0: overwrite
    DTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        ctx_.cudnn(), &one, x_desc, xs, y_desc, g, bwd_filter_conv_.get(), bwd_filter_algo_,
        workspace, workspace_bytes, &zero, w_desc, dw.raw()));
    if (spec_.bias) {
      DTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardBias(ctx_.cudnn(), &one, y_desc, g, &zero,
                                                      bias_.get(), db.raw()));
    }
  }

 private:
  // Measures every algorithm of each pass (cudnnFind* allocates its own buffers), keeps the
  // fastest, and grows the shared workspace to what the three chosen ones need.
  void choose_algorithms() {
    cudnnHandle_t handle = ctx_.cudnn();
    const size_t limit = workspace_limit();
    // bf16 keeps the math types cudnnFind reports (tensor cores for bf16 data, TF32 on the
    // bf16-exact f32 filter pass); f32 with strict fp32 keeps FMA.
    const bool strict = !bf16() && ctx_.conv_math() == CUDNN_FMA_MATH, direct = direct_only();
    // The filter pass's descriptors: in bf16, those of the f32 copies.
    cudnnTensorDescriptor_t fx = bf16() ? x32_.get() : x_.get();
    cudnnTensorDescriptor_t fy = bf16() ? y32_.get() : y_.get();
    cudnnFilterDescriptor_t fw = bf16() ? w32_.get() : w_.get();
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
        handle, fx, fy, bwd_filter_conv_.get(), fw, static_cast<int>(bf.size()), &count,
        bf.data()));
    const auto wf = fastest(bf, count, limit, strict, direct, "backward filter", spec_);
    bwd_filter_algo_ = wf.algo;
    DTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(bwd_filter_conv_.get(), wf.mathType));
    DTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        handle, fx, fy, bwd_filter_conv_.get(), fw, bwd_filter_algo_, &bytes));
    // bf16: the f32 copies of x and dy come first in the workspace.
    const size_t copies =
        bf16() ? copy_bytes(spec_.input_shape().numel()) + copy_bytes(spec_.output_shape().numel())
               : 0;
    need = std::max({need, copies + std::max(wf.memory, bytes)});

    ctx_.reserve_workspace(need);
  }

  bool bf16() const { return spec_.dtype == DType::bf16; }
  static size_t copy_bytes(int64_t numel) {
    return aligned(static_cast<size_t>(numel) * sizeof(float));
  }

  // An activation or its gradient: in the spec's dtype.
  void check(const Tensor& t, const Shape& shape, const char* what) const {
    check_count(t, shape, what);
    DTRAIN_CHECK(t.device() == Device::cuda && t.dtype() == spec_.dtype)
        << "conv " << what << ": expected a " << dtype_name(spec_.dtype)
        << " tensor on the GPU, got " << dtype_name(t.dtype()) << " on " << device_name(t.device());
  }
  // Weights, bias and their gradients: f32 whatever the activations' dtype.
  static void check_f32(const Tensor& t, const Shape& shape, const char* what) {
    check_count(t, shape, what);
    check_device_f32(t, shape.numel(), "conv");
  }
  static void check_count(const Tensor& t, const Shape& shape, const char* what) {
    DTRAIN_CHECK(t.numel() == shape.numel())
        << "conv " << what << ": " << t.shape().str() << ", expected " << shape.str()
        << " (plans are per batch size)";
  }

  // dy as cuDNN must see it: masked by the fused ReLU's output (in the spec's dtype).
  const void* masked(const Tensor& y, const Tensor& dy) {
    check(dy, spec_.output_shape(), "dy");
    if (!spec_.relu) return dy.raw();
    check(y, spec_.output_shape(), "y");
    if (bf16())
      relu_backward_bf16(y.data<uint16_t>(), dy.data<uint16_t>(), masked_.data<uint16_t>(),
                         dy.numel(), ctx_.stream());
    else
      relu_backward_f32(y.data<float>(), dy.data<float>(), masked_.data<float>(), dy.numel(),
                        ctx_.stream());
    return masked_.raw();
  }

  // The f32 master weights converted into the op's bf16 copy, on every call that reads them.
  const void* weights_bf16(const Tensor& w) {
    f32_to_bf16(w.data<float>(), w16_.data<uint16_t>(), w16_.numel(), ctx_.stream());
    return w16_.raw();
  }

  CudaContext& ctx_;
  ConvSpec spec_;
  TensorDesc x_, y_, bias_;  // x and y in the spec's dtype, the bias f32
  FilterDesc w_;             // in the spec's dtype
  TensorDesc x32_, y32_;     // bf16: the f32 copies the filter gradient reads
  FilterDesc w32_;           // bf16: the f32 filter gradient
  ConvDesc fwd_conv_, bwd_data_conv_, bwd_filter_conv_;  // one per pass: math types may differ
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  Tensor masked_;  // the masked gradient (fused ReLU), in the spec's dtype
  Tensor w16_;     // bf16: the weights converted on each call
};

}  // namespace

std::unique_ptr<ConvOp> make_conv(CudaContext& ctx, const ConvSpec& spec) {
  return std::make_unique<CudaConv>(ctx, spec);
}

}  // namespace dtrain::cuda
