// Backend: everything that touches device memory or does arithmetic, behind one interface.
// Layers, the optimizer and the schedulers call only this; the CPU implementation (oneDNN) is
// the reference and the CUDA one (cuDNN, cuBLAS, own kernels) must match it per op.
#pragma once
#include <memory>  // unique_ptr: ops are owned by the layer that made them
#include <string>

#include "backend/flat_pass.h"  // PassKernels, PassBuffers: fused element-wise passes
#include "backend/ops.h"        // op specs and op interfaces
#include "core/tensor.h"        // Tensor, Allocator

namespace dtrain {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu (oneDNN 2.6, avx512_core_amx)", "cuda (H100)"
  virtual Device device() const = 0;
  virtual Allocator& allocator() = 0;
  // Why this backend cannot train in bf16 (cluster.precision: bf16), or empty when it can: a CPU
  // without native bf16 instructions (oneDNN would emulate them, slower than f32), a GPU
  // without bf16 tensor cores.
  virtual std::string bf16_unavailable() const = 0;
  // What a user of bf16 on this backend should know, or empty (a CPU whose bf16 units are no
  // faster than f32, so that its products run on the f32 kernels: the run log's note).
  virtual std::string bf16_caveat() const { return {}; }
  // Intra-op threads (CPU); a no-op elsewhere.
  virtual void set_num_threads(int threads) = 0;
  // Waits until every enqueued operation has finished.
  virtual void synchronize() = 0;
  // Host memory that the device copies from and to asynchronously (pinned on CUDA): the
  // loader's batches and the host staging of gradients live in it.
  virtual Allocator& host_allocator() { return cpu_allocator(); }
  // The native queue the ops enqueue on (a cudaStream_t on CUDA) and the device ordinal, for
  // code that orders its own device work after the compute (the NCCL and staging transports
  // of the gradient all-reduce); null and -1 on the CPU, whose ops finish before they return.
  virtual void* native_stream() { return nullptr; }
  virtual int device_index() const { return -1; }
  // Memory of the device a rank trains on, for the start-up memory check (docs/memory.md): its
  // capacity, and the most the backend has held at once since it started. 0 on the CPU, whose
  // ranks share the host's memory (the check reads /proc/meminfo; run.yaml the process's RSS).
  virtual int64_t device_memory_bytes() const { return 0; }
  virtual int64_t peak_device_memory_bytes() const { return 0; }
  // dst (this device) ← src (host), complete on return, on a queue of its own so that the
  // compute stream keeps running: prefetching loaders call it from their own thread to have
  // the next batch on the device before the compute thread asks for it.
  virtual void upload(const Tensor& dst, const Tensor& src) {
    copy(dst, src);
    synchronize();
  }

  Tensor empty(const Shape& shape, DType dtype = DType::f32) {
    return Tensor::empty(shape, dtype, allocator());
  }
  Tensor zeros(const Shape& shape, DType dtype = DType::f32) {
    Tensor t = empty(shape, dtype);
    fill_zero(t);
    return t;
  }
  // A flat f32 buffer of zeros whose memory is taken only where it is written, and the return
  // of a part of it to the system (it reads as zero afterwards): how a sharded run
  // (algorithm.shard: gradients, parameters; docs/memory.md) keeps a whole model's buffer while
  // only its shard and the segments in use take memory. The model's flat buffers are reserved.
  // The defaults allocate zeros and keep the memory (the same results without the saving):
  // releases_memory() says whether this backend gives memory back.
  virtual Tensor reserve(const Shape& shape) { return zeros(shape); }
  virtual void release(const Tensor& part) {}
  virtual bool releases_memory() const { return false; }

  // ---- op factories (called at build time, once per shape) ----
  virtual std::unique_ptr<LinearOp> make_linear(const LinearSpec&) = 0;
  virtual std::unique_ptr<ConvOp> make_conv(const ConvSpec&) = 0;
  virtual std::unique_ptr<PoolOp> make_pool(const PoolSpec&) = 0;
  virtual std::unique_ptr<ReluOp> make_relu(const Shape&, DType dtype = DType::f32) = 0;
  virtual std::unique_ptr<GeluOp> make_gelu(const GeluSpec&) = 0;
  virtual std::unique_ptr<LrnOp> make_lrn(const LrnSpec&) = 0;
  virtual std::unique_ptr<BatchNormOp> make_batchnorm(const BatchNormSpec&) = 0;
  virtual std::unique_ptr<SoftmaxXentOp> make_softmax_xent(const SoftmaxXentSpec&) = 0;
  virtual std::unique_ptr<DropoutOp> make_dropout(const DropoutSpec&) = 0;
  virtual std::unique_ptr<EmbeddingOp> make_embedding(const EmbeddingSpec&) = 0;
  virtual std::unique_ptr<LayerNormOp> make_layer_norm(const LayerNormSpec&) = 0;
  virtual std::unique_ptr<AttentionOp> make_attention(const AttentionSpec&) = 0;

  // ---- activation layouts (ops.h ChannelBlock) ----
  // The channel block this backend's ops run fastest on for 4-D activations of `channels`
  // channels: 1 (plain NCHW) unless a backend says otherwise; always a divisor of `channels`.
  virtual ChannelBlock preferred_block(int64_t channels) const { return 1; }
  // The block a convolution's output should have: preferred_block, unless the backend runs
  // that convolution's passes on plain-layout kernels.
  virtual ChannelBlock conv_output_block(const ConvSpec& spec) const {
    return preferred_block(spec.out_channels);
  }
  // dst ← src in another layout and/or dtype (f32 ↔ bf16, rounding to nearest even); both
  // [N, C, H, W] (or any shape with block 1). Mixed precision's casts are reorders.
  virtual void reorder(const Tensor& dst, ChannelBlock dst_block, const Tensor& src,
                       ChannelBlock src_block);
  // `channels` channels of every pixel, from src's channel src_first on into dst's channel
  // dst_first on; dst and src are [N, C, H, W] with the same N, H, W (C may differ) and `block`
  // (channel padding and slicing). The default makes two views per call; backends override it.
  virtual void copy_channels(const Tensor& dst, int64_t dst_first, const Tensor& src,
                             int64_t src_first, int64_t channels, ChannelBlock block);

  // ---- element-wise and flat-buffer operations (f32 unless said) ----
  virtual void fill_zero(const Tensor& t) = 0;  // any dtype
  virtual void fill(const Tensor& t, float value) = 0;
  // dst ← src; either may be on the host (the only way data crosses devices).
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  // `rows` rows of `row_elems` elements from src (row r at src.data + r·src_stride) to dst
  // (row r at dst.data + r·dst_stride), same device: channel padding, concatenation, slicing.
  virtual void copy_rows(const Tensor& dst, int64_t dst_stride, const Tensor& src,
                         int64_t src_stride, int64_t rows, int64_t row_elems) = 0;
  // out = a + b; f32 or bf16 (all three the same), out may be a or b.
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // out = max(a + b, 0) (a residual add with the ReLU after it); out may be a or b. The base
  // class adds, then applies a ReLU op in place.
  virtual void add_relu(const Tensor& a, const Tensor& b, const Tensor& out);
  virtual void axpy(float alpha, const Tensor& x, const Tensor& y) = 0;               // y += αx
  virtual void axpby(float alpha, const Tensor& x, float beta, const Tensor& y) = 0;  // y = αx + βy
  virtual void scale(const Tensor& x, float alpha) = 0;                               // x *= α
  // Σ a·b accumulated in double in an order fixed by the size alone, so that equal inputs give
  // equal results on every rank (SAPipe's delay compensation gᵀΔ). Synchronises.
  virtual double dot(const Tensor& a, const Tensor& b) = 0;
  // y = αx + βy, then dot(y, z), in one pass: the same bits as axpby followed by dot (SAPipe's
  // wp3 ĝ and its gᵀΔ). The base class makes the two calls.
  virtual double axpby_dot(float alpha, const Tensor& x, float beta, const Tensor& y,
                           const Tensor& z);
  // dst = α·src (f32, same device), reading src once: the base class copies, then scales.
  virtual void scale_copy(const Tensor& dst, const Tensor& src, float alpha);
  // g ← g + λ·g⊙g⊙Δ: DC-ASGD's diagonal delay compensation.
  virtual void dc_diagonal(const Tensor& grads, const Tensor& delta, float lambda) = 0;

  // ---- fused element-wise passes (flat_pass.h; run_pass.h's run_pass<F> packs the buffers) ----
  // The optimizers' updates, written once as functors: the CPU runs the pass's host loop on its
  // threads, the GPU its kernel from the plugin's table.
  virtual void run_pass(const PassKernels& pass, const void* functor,
                        const PassBuffers& buffers) = 0;
  // A sum pass (flat_pass.h): Σ y·z in an order fixed by the size. `scratch` (n floats on this
  // device) is where a backend that cannot sum while it passes puts z first (the GPU).
  // Synchronises.
  virtual double run_sum_pass(const PassKernels& pass, const void* functor,
                              const PassBuffers& buffers, const Tensor& scratch) = 0;

  // y[n, :] += row for y viewed as [N, row.numel()] (a learned position table added to every
  // sequence of a batch).
  virtual void add_to_rows(const Tensor& y, const Tensor& row) = 0;
  // out = Σ_n x[n, :] for x viewed as [N, out.numel()], summed in an order fixed by the shapes
  // (the position table's gradient).
  virtual void sum_rows(const Tensor& x, const Tensor& out) = 0;
};

enum class DeviceChoice { cpu, cuda, auto_ };

struct BackendOptions {
  DeviceChoice device = DeviceChoice::auto_;
  int threads = 1;
  int local_rank = 0;       // picks the GPU on multi-GPU nodes: GPU local_rank % device count
  bool allow_tf32 = false;  // cluster.tf32: fp32 GEMMs/convolutions on TF32 tensor cores
  bool announce = true;     // `auto` says on stderr which backend it picked
};

// The CPU backend always exists; `cuda` without a usable GPU is an InputError; `auto_` picks
// CUDA when built and a GPU is usable, else the CPU, and says which (and why) on stderr.
std::unique_ptr<Backend> make_backend(const BackendOptions& options);

}  // namespace dtrain
