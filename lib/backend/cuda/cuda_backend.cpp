#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstring>  // memcpy, memset: host-to-host copies
#include <mutex>

#include "backend/cuda/cuda_allocator.h"  // pinned_allocator
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"   // CudaContext
#include "backend/cuda/cuda_ops.h"       // op constructors
#include "backend/cuda/device_passes.h"  // find_device_pass: run_pass
#include "backend/cuda/kernels.h"        // element-wise launchers
#include "backend/cuda/sequence_kernels.h"

namespace dtrain {
namespace {

void check_f32(const Tensor& t, const char* what) {
  DTRAIN_CHECK(t.dtype() == DType::f32 && t.device() == Device::cuda)
      << what << ": expected an f32 tensor on the GPU";
}
// f32 or bf16 on the GPU (mixed precision's activations), the three of an add alike.
void check_activations(const Tensor& a, const Tensor& b, const Tensor& out, const char* what) {
  for (const Tensor* t : {&a, &b, &out})
    DTRAIN_CHECK((t->dtype() == DType::f32 || t->dtype() == DType::bf16) &&
                 t->dtype() == a.dtype() && t->device() == Device::cuda)
        << what << ": expected three f32 or three bf16 tensors on the GPU, got "
        << dtype_name(a.dtype()) << ", " << dtype_name(b.dtype()) << ", "
        << dtype_name(out.dtype());
}
void check_same_size(const Tensor& a, const Tensor& b, const char* what) {
  DTRAIN_CHECK(a.numel() == b.numel())
      << what << ": sizes differ, " << a.shape().str() << " vs " << b.shape().str();
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, bool allow_tf32)
      : ctx_(std::make_unique<cuda::CudaContext>(device, allow_tf32)) {
    DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&upload_stream_, cudaStreamNonBlocking));
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(ctx_->stream());
    cudaStreamSynchronize(upload_stream_);
    cudaStreamDestroy(upload_stream_);
    if (dot_scratch_) cudaFree(dot_scratch_);
  }

  std::string name() const override {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    return "cuda (GPU " + std::to_string(ctx_->device()) + ": " + ctx_->device_name() + ", CUDA " +
           std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) + ", cuDNN " +
           std::to_string(cudnnGetVersion()) + (ctx_->allow_tf32() ? ", TF32" : ", strict fp32") +
           ")";
  }
  // bf16 products run on tensor cores (cuBLAS GemmEx, cuDNN), which take bf16 from Ampere
  // (compute capability 8.0) on; older GPUs would emulate them slower than fp32.
  std::string bf16_unavailable() const override {
    const int cc = ctx_->compute_capability();
    if (cc >= 80) return "";
    return ctx_->device_name() + " (compute capability " + std::to_string(cc / 10) + "." +
           std::to_string(cc % 10) + ") has no bf16 tensor cores; bf16 needs 8.0 (Ampere) or newer";
  }
  Device device() const override { return Device::cuda; }
  Allocator& allocator() override { return ctx_->allocator(); }
  Allocator& host_allocator() override { return cuda::pinned_allocator(); }
  void* native_stream() override { return ctx_->stream(); }
  int device_index() const override { return ctx_->device(); }
  int64_t device_memory_bytes() const override { return cuda::device_total_bytes(ctx_->device()); }
  int64_t peak_device_memory_bytes() const override {
    return cuda::device_peak_bytes(ctx_->device());
  }
  void set_num_threads(int) override {}
  // On the loader's thread: its own stream, so the copy overlaps the compute stream's work.
  void upload(const Tensor& dst, const Tensor& src) override {
    DTRAIN_CHECK(dst.bytes() == src.bytes() && dst.device() == Device::cuda &&
                 src.device() == Device::cpu)
        << "upload: " << src.shape().str() << " host into " << dst.shape().str() << " device";
    if (dst.bytes() == 0) return;
    cuda::set_device(ctx_->device());
    std::lock_guard lock(upload_mutex_);  // the train and test loaders share the stream
    DTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(dst.raw(), src.raw(), dst.bytes(), cudaMemcpyHostToDevice, upload_stream_));
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(upload_stream_));
  }
  void synchronize() override {
    cuda::set_device(ctx_->device());
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(ctx_->stream()));
  }

  std::unique_ptr<LinearOp> make_linear(const LinearSpec& s) override {
    return cuda::make_linear(*ctx_, s);
  }
  std::unique_ptr<ConvOp> make_conv(const ConvSpec& s) override {
    return cuda::make_conv(*ctx_, s);
  }
  std::unique_ptr<PoolOp> make_pool(const PoolSpec& s) override {
    return cuda::make_pool(*ctx_, s);
  }
  std::unique_ptr<ReluOp> make_relu(const Shape& s, DType dtype = DType::f32) override {
    return cuda::make_relu(*ctx_, s, dtype);
  }
  std::unique_ptr<GeluOp> make_gelu(const GeluSpec& s) override {
    return cuda::make_gelu(*ctx_, s);
  }
  std::unique_ptr<LrnOp> make_lrn(const LrnSpec& s) override { return cuda::make_lrn(*ctx_, s); }
  std::unique_ptr<BatchNormOp> make_batchnorm(const BatchNormSpec& s) override {
    return cuda::make_batchnorm(*ctx_, s);
  }
  std::unique_ptr<SoftmaxXentOp> make_softmax_xent(const SoftmaxXentSpec& s) override {
    return cuda::make_softmax_xent(*ctx_, s);
  }
  std::unique_ptr<DropoutOp> make_dropout(const DropoutSpec& s) override {
    DTRAIN_CHECK(s.block == 1) << "dropout: the CUDA backend has plain layouts only";
    return cuda::make_dropout(*ctx_, s.shape, s.dtype);
  }
  std::unique_ptr<EmbeddingOp> make_embedding(const EmbeddingSpec& s) override {
    return cuda::make_embedding(*ctx_, s);
  }
  std::unique_ptr<LayerNormOp> make_layer_norm(const LayerNormSpec& s) override {
    return cuda::make_layer_norm(*ctx_, s);
  }
  std::unique_ptr<AttentionOp> make_attention(const AttentionSpec& s) override {
    return cuda::make_attention(*ctx_, s);
  }

  // Plain layouts only (the base class's check); a dtype change is a cast kernel, the same dtype
  // a copy.
  void reorder(const Tensor& dst, ChannelBlock dst_block, const Tensor& src,
               ChannelBlock src_block) override {
    if (dst.dtype() == src.dtype()) return Backend::reorder(dst, dst_block, src, src_block);
    DTRAIN_CHECK(dst_block == 1 && src_block == 1)
        << name() << ": no blocked layouts (reorder " << src_block << " → " << dst_block << ")";
    DTRAIN_CHECK(dst.numel() == src.numel() && dst.device() == Device::cuda &&
                 src.device() == Device::cuda)
        << "reorder: " << src.shape().str() << " into " << dst.shape().str()
        << " (both on the GPU, the same count)";
    if (src.dtype() == DType::f32 && dst.dtype() == DType::bf16)
      cuda::f32_to_bf16(src.data<float>(), dst.data<uint16_t>(), src.numel(), ctx_->stream());
    else if (src.dtype() == DType::bf16 && dst.dtype() == DType::f32)
      cuda::bf16_to_f32(src.data<uint16_t>(), dst.data<float>(), src.numel(), ctx_->stream());
    else
      DTRAIN_CHECK(false) << "reorder: no cast from " << dtype_name(src.dtype()) << " to "
                          << dtype_name(dst.dtype());
  }

  void fill_zero(const Tensor& t) override {
    if (t.bytes() == 0) return;
    if (t.device() == Device::cpu) {  // host tensors of this backend (pinned staging)
      synchronize();
      std::memset(t.raw(), 0, t.bytes());
      return;
    }
    DTRAIN_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.bytes(), ctx_->stream()));
  }
  void fill(const Tensor& t, float value) override {
    check_f32(t, "fill");
    cuda::fill_f32(t.data<float>(), t.numel(), value, ctx_->stream());
  }
  // Host→device copies return once the source may be reused (pageable) or at once (pinned:
  // the caller keeps the pinned buffer until the stream passed it). Device→host copies into
  // pageable memory are complete on return; into pinned memory only after synchronize().
  void copy(const Tensor& dst, const Tensor& src) override {
    DTRAIN_CHECK(dst.bytes() == src.bytes())
        << "copy: " << src.shape().str() << " into " << dst.shape().str();
    if (dst.bytes() == 0 || dst.raw() == src.raw()) return;
    if (dst.device() == Device::cpu && src.device() == Device::cpu) {
      synchronize();  // the host source may be the target of an enqueued device→host copy
      std::memcpy(dst.raw(), src.raw(), dst.bytes());
      return;
    }
    DTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(dst.raw(), src.raw(), dst.bytes(), cudaMemcpyDefault, ctx_->stream()));
  }
  void copy_rows(const Tensor& dst, int64_t dst_stride, const Tensor& src, int64_t src_stride,
                 int64_t rows, int64_t row_elems) override {
    DTRAIN_CHECK(dst.dtype() == src.dtype()) << "copy_rows: dtypes differ";
    if (rows <= 0 || row_elems <= 0) return;
    const size_t esize = dtype_size(src.dtype());
    DTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(dst.raw(), dst_stride * esize, src.raw(),
                                        src_stride * esize, row_elems * esize, rows,
                                        cudaMemcpyDefault, ctx_->stream()));
  }
  // Plain layouts only: one strided 2-D copy (the base class's would make views per call).
  void copy_channels(const Tensor& dst, int64_t dst_first, const Tensor& src, int64_t src_first,
                     int64_t channels, ChannelBlock block) override {
    const Shape& d = dst.shape();
    const Shape& s = src.shape();
    DTRAIN_CHECK(block == 1 && d.rank() == 4 && s.rank() == 4 && d[0] == s[0] && d[2] == s[2] &&
                 d[3] == s[3] && dst_first + channels <= d[1] && src_first + channels <= s[1])
        << "copy_channels: " << channels << " channels from " << s.str() << " to " << d.str();
    const int64_t plane = d[2] * d[3];
    const size_t esize = dtype_size(src.dtype());
    if (channels <= 0 || d[0] == 0) return;
    DTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(
        static_cast<char*>(dst.raw()) + dst_first * plane * esize, d[1] * plane * esize,
        static_cast<const char*>(src.raw()) + src_first * plane * esize, s[1] * plane * esize,
        channels * plane * esize, d[0], cudaMemcpyDefault, ctx_->stream()));
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    check_activations(a, b, out, "add");
    check_same_size(a, b, "add");
    check_same_size(a, out, "add");
    if (a.dtype() == DType::bf16)
      cuda::add_bf16(a.data<uint16_t>(), b.data<uint16_t>(), out.data<uint16_t>(), a.numel(),
                     ctx_->stream());
    else
      cuda::add_f32(a.data<float>(), b.data<float>(), out.data<float>(), a.numel(), ctx_->stream());
  }
  void add_relu(const Tensor& a, const Tensor& b, const Tensor& out) override {
    check_activations(a, b, out, "add_relu");
    check_same_size(a, b, "add_relu");
    check_same_size(a, out, "add_relu");
    if (a.dtype() == DType::bf16)
      cuda::add_relu_bf16(a.data<uint16_t>(), b.data<uint16_t>(), out.data<uint16_t>(), a.numel(),
                          ctx_->stream());
    else
      cuda::add_relu_f32(a.data<float>(), b.data<float>(), out.data<float>(), a.numel(),
                         ctx_->stream());
  }
  void axpy(float alpha, const Tensor& x, const Tensor& y) override {
    check_f32(x, "axpy");
    check_same_size(x, y, "axpy");
    cuda::axpy_f32(alpha, x.data<float>(), y.data<float>(), x.numel(), ctx_->stream());
  }
  void axpby(float alpha, const Tensor& x, float beta, const Tensor& y) override {
    check_f32(x, "axpby");
    check_same_size(x, y, "axpby");
    cuda::axpby_f32(alpha, x.data<float>(), beta, y.data<float>(), x.numel(), ctx_->stream());
  }
  void scale(const Tensor& x, float alpha) override {
    check_f32(x, "scale");
    cuda::scale_f32(x.data<float>(), alpha, x.numel(), ctx_->stream());
  }
  double dot(const Tensor& a, const Tensor& b) override {
    check_f32(a, "dot");
    check_same_size(a, b, "dot");
    cuda::set_device(ctx_->device());
    return cuda::dot_f32(a.data<float>(), b.data<float>(), a.numel(), dot_scratch(),
                         ctx_->stream());
  }
  void dc_diagonal(const Tensor& grads, const Tensor& delta, float lambda) override {
    check_f32(grads, "dc_diagonal");
    check_same_size(grads, delta, "dc_diagonal");
    cuda::dc_diagonal_f32(grads.data<float>(), delta.data<float>(), grads.numel(), lambda,
                          ctx_->stream());
  }
  void run_pass(const PassKernels& pass, const void* functor, const PassBuffers& buffers) override {
    const cuda::DevicePass* kernel = device_pass(pass);
    DTRAIN_CHECK(kernel->run) << pass.name << " is a sum pass: run_sum_pass runs it";
    cuda::set_device(ctx_->device());
    kernel->run(functor, buffers, ctx_->stream());
  }
  // The elements' z into `scratch`, then Backend::dot's fixed-order sum with buffer kSumWith.
  double run_sum_pass(const PassKernels& pass, const void* functor, const PassBuffers& buffers,
                      const Tensor& scratch) override {
    const cuda::DevicePass* kernel = device_pass(pass);
    DTRAIN_CHECK(kernel->produce) << pass.name << " is not a sum pass: run_pass runs it";
    check_f32(scratch, "run_sum_pass scratch");
    DTRAIN_CHECK(scratch.numel() >= buffers.n)
        << pass.name << ": a scratch of " << scratch.numel() << " floats for " << buffers.n;
    cuda::set_device(ctx_->device());
    kernel->produce(functor, buffers, scratch.data<float>(), ctx_->stream());
    const float* y = buffers.data[kernel->sum_with];
    return cuda::dot_f32(y, scratch.data<float>(), buffers.n, dot_scratch(), ctx_->stream());
  }
  void add_to_rows(const Tensor& y, const Tensor& row) override {
    check_f32(y, "add_to_rows");
    check_f32(row, "add_to_rows row");
    DTRAIN_CHECK(row.numel() > 0 && y.numel() % row.numel() == 0)
        << "add_to_rows: " << y.shape().str() << " is not rows of " << row.shape().str();
    cuda::add_to_rows_f32(y.data<float>(), row.data<float>(), y.numel() / row.numel(), row.numel(),
                          ctx_->stream());
  }
  void sum_rows(const Tensor& x, const Tensor& out) override {
    check_f32(x, "sum_rows");
    check_f32(out, "sum_rows out");
    DTRAIN_CHECK(out.numel() > 0 && x.numel() % out.numel() == 0)
        << "sum_rows: " << x.shape().str() << " is not rows of " << out.shape().str();
    cuda::sum_rows_f32(x.data<float>(), out.data<float>(), x.numel() / out.numel(), out.numel(),
                       ctx_->stream());
  }

 private:
  // Backend::dot's block sums, allocated on first use.
  double* dot_scratch() {
    if (!dot_scratch_) {
      DTRAIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dot_scratch_),
                                   (cuda::kDotBlocks + 1) * sizeof(double)));
    }
    return dot_scratch_;
  }
  // The plugin's kernel of `pass` (a .cu lists it with DTRAIN_DEVICE_PASSES).
  static const cuda::DevicePass* device_pass(const PassKernels& pass) {
    const cuda::DevicePass* kernel = cuda::find_device_pass(pass.name);
    DTRAIN_CHECK(kernel != nullptr)
        << "the CUDA plugin has no kernel for pass " << pass.name
        << " (list its functor with DTRAIN_DEVICE_PASSES in a .cu of the plugin)";
    return kernel;
  }

  std::unique_ptr<cuda::CudaContext> ctx_;
  cudaStream_t upload_stream_ = nullptr;
  std::mutex upload_mutex_;
  double* dot_scratch_ = nullptr;  // Backend::dot's block sums
};

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // not sticky, but leave no error behind for later checks
    return 0;
  }
  return count;
}

bool cuda_device_usable(int local_rank, std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why)
      *why = std::string("no usable CUDA driver or GPU (") + cudaGetErrorString(status) + ")";
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA GPU is visible";
    return false;
  }
  const int device = local_rank % count;
  // Creating the primary context is the real test (a GPU in exclusive-process mode held by
  // another process, or a broken driver, fails here).
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    if (why)
      *why = "GPU " + std::to_string(device) + " cannot be initialised (" +
             cudaGetErrorString(cudaGetLastError()) + ")";
    return false;
  }
  return true;
}

std::unique_ptr<Backend> make_cuda_backend(int local_rank, bool allow_tf32) {
  std::string why;
  DTRAIN_INPUT_CHECK(cuda_device_usable(local_rank, &why))
      << "cluster.device: cuda, but " << why << " (use cluster.device: auto or cpu)";
  return std::make_unique<CudaBackend>(local_rank % cuda_device_count(), allow_tf32);
}

}  // namespace dtrain
