// Max and average pooling over NCHW. cuDNN when its output size (always floor) is the spec's;
// then its windows and divisors are the CPU's: max pooling ignores padding, and a floor-sized
// window never reaches past the padded border, so include-padding averages divide by the full
// kernel as cuDNN does. cuDNN's max backward re-reads x and y and needs no workspace; it uses
// the deterministic algorithm, which gives a tied window's gradient to one input.
// A ceil-mode output one larger than floor has windows hanging over the bottom/right edge,
// which cuDNN's symmetric padding cannot describe: those ops run the own kernels of norm.cu,
// which repeat cpu_pool.cpp (and, for max, keep the argmax in the workspace as it does).
// bf16 activations (PoolSpec::dtype) take the same two paths with bf16 tensor descriptors
// (cuDNN computes in f32 and rounds once) or the own kernels' bf16 forms, so the workspace is
// f32's. kCudnnBf16 switches cuDNN off for bf16 should its bf16 pooling differ from the CPU's.
#include <memory>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cudnn_descriptors.h"  // descriptor handles, nchw_desc
#include "backend/cuda/norm_kernels.h"       // pooling with overhanging windows
#include "core/error.h"

namespace dtrain::cuda {
namespace {

constexpr bool kCudnnBf16 = true;

int dnn_int(int64_t v) {
  return cuda::dnn_int(v, "pooling");
}
// A dense NCHW descriptor of the activations' dtype (f32 or bf16).
TensorDesc nchw_desc(int64_t n, int64_t c, int64_t h, int64_t w, DType dtype) {
  TensorDesc d = new_tensor_desc();
  DTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(
      d.get(), CUDNN_TENSOR_NCHW, dtype == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT,
      dnn_int(n), dnn_int(c), dnn_int(h), dnn_int(w)));
  return d;
}

cudnnPoolingMode_t pooling_mode(const PoolSpec& s) {
  if (s.kind == PoolKind::max) return CUDNN_POOLING_MAX_DETERMINISTIC;
  return s.avg_include_padding ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                               : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
}

class CudaPool final : public PoolOp {
 public:
  CudaPool(CudaContext& ctx, const PoolSpec& s)
      : ctx_(ctx), s_(s), geometry_{s.height,   s.width,    s.out_height(),       s.out_width(),
                                    s.kernel_h, s.kernel_w, s.stride_h,           s.stride_w,
                                    s.pad_h,    s.pad_w,    s.avg_include_padding} {
    DTRAIN_CHECK(s.batch > 0 && geometry_.out_height > 0 && geometry_.out_width > 0)
        << "pooling output would be empty for input " << s.input_shape().str();
    DTRAIN_CHECK(s.pad_h < s.kernel_h && s.pad_w < s.kernel_w) << "pooling padding >= kernel";
    check_activation_dtype(s.dtype, "pooling");
    x_ = nchw_desc(s.batch, s.channels, s.height, s.width, s.dtype);
    y_ = nchw_desc(s.batch, s.channels, geometry_.out_height, geometry_.out_width, s.dtype);
    cudnnPoolingDescriptor_t p = nullptr;
    DTRAIN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&p));
    pool_.reset(p);
    // NaNs propagate, so that a diverged run shows up in the loss.
    DTRAIN_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
        p, pooling_mode(s), CUDNN_PROPAGATE_NAN, dnn_int(s.kernel_h), dnn_int(s.kernel_w),
        dnn_int(s.pad_h), dnn_int(s.pad_w), dnn_int(s.stride_h), dnn_int(s.stride_w)));
    int n = 0, c = 0, h = 0, w = 0;
    DTRAIN_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(p, x_.get(), &n, &c, &h, &w));
    use_cudnn_ = n == s.batch && c == s.channels && h == geometry_.out_height &&
                 w == geometry_.out_width && (s.dtype == DType::f32 || kCudnnBf16);
  }

  size_t workspace_bytes() const override {
    if (use_cudnn_ || s_.kind != PoolKind::max) return 0;
    return static_cast<size_t>(planes() * geometry_.out_height * geometry_.out_width) *
           sizeof(int32_t);
  }

  void forward(const Tensor& x, const Tensor& y, const Tensor& workspace, bool training) override {
    check(x, s_.input_shape(), "x");
    check(y, s_.output_shape(), "y");
    if (use_cudnn_) {
      const float one = 1.0f, zero = 0.0f;
      DTRAIN_CUDNN_CHECK(cudnnPoolingForward(ctx_.cudnn(), pool_.get(), &one, x_.get(), x.raw(),
                                             &zero, y_.get(), y.raw()));
    } else if (s_.kind == PoolKind::max) {
      int32_t* argmax = nullptr;
      if (training) {
        DTRAIN_CHECK(workspace.bytes() >= workspace_bytes()) << "pool workspace too small";
        argmax = workspace.data<int32_t>();
      }
      if (bf16())
        max_pool_forward_bf16(x.data<uint16_t>(), y.data<uint16_t>(), argmax, planes(), geometry_,
                              ctx_.stream());
      else
        max_pool_forward_f32(x.data<float>(), y.data<float>(), argmax, planes(), geometry_,
                             ctx_.stream());
    } else if (bf16()) {
      avg_pool_forward_bf16(x.data<uint16_t>(), y.data<uint16_t>(), planes(), geometry_,
                            ctx_.stream());
    } else {
      avg_pool_forward_f32(x.data<float>(), y.data<float>(), planes(), geometry_, ctx_.stream());
    }
  }

  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace,
                const Tensor& dx) override {
    check(dy, s_.output_shape(), "dy");
    check(dx, s_.input_shape(), "dx");
    if (use_cudnn_) {
      check(x, s_.input_shape(), "x");
      check(y, s_.output_shape(), "y");
      const float one = 1.0f, zero = 0.0f;
      DTRAIN_CUDNN_CHECK(cudnnPoolingBackward(ctx_.cudnn(), pool_.get(), &one, y_.get(), y.raw(),
                                              y_.get(), dy.raw(), x_.get(), x.raw(), &zero,
                                              x_.get(), dx.raw()));
    } else if (s_.kind == PoolKind::max) {
      DTRAIN_CHECK(workspace.bytes() >= workspace_bytes()) << "pool workspace too small";
      if (bf16())
        max_pool_backward_bf16(dy.data<uint16_t>(), workspace.data<int32_t>(), dx.data<uint16_t>(),
                               planes(), geometry_, ctx_.stream());
      else
        max_pool_backward_f32(dy.data<float>(), workspace.data<int32_t>(), dx.data<float>(),
                              planes(), geometry_, ctx_.stream());
    } else if (bf16()) {
      avg_pool_backward_bf16(dy.data<uint16_t>(), dx.data<uint16_t>(), planes(), geometry_,
                             ctx_.stream());
    } else {
      avg_pool_backward_f32(dy.data<float>(), dx.data<float>(), planes(), geometry_, ctx_.stream());
    }
  }

 private:
  int64_t planes() const { return s_.batch * s_.channels; }
  bool bf16() const { return s_.dtype == DType::bf16; }

  void check(const Tensor& t, const Shape& shape, const char* what) const {
    DTRAIN_CHECK(t.numel() == shape.numel())
        << "pooling " << what << ": " << t.shape().str() << ", expected " << shape.str()
        << " (plans are per batch size)";
    check_device(t, s_.dtype, shape.numel(), "pooling");
  }

  CudaContext& ctx_;
  PoolSpec s_;
  PoolGeometry geometry_;
  TensorDesc x_, y_;
  PoolDesc pool_;
  bool use_cudnn_ = false;  // cuDNN's floor output size is the spec's
};

}  // namespace

std::unique_ptr<PoolOp> make_pool(CudaContext& ctx, const PoolSpec& spec) {
  return std::make_unique<CudaPool>(ctx, spec);
}

}  // namespace dtrain::cuda
