// The CPU backend: oneDNN primitives for the heavy ops, vectorised OpenMP loops for the
// element-wise and flat-buffer ops. It is the reference every other backend is tested against.
#pragma once
#include <memory>

#include "backend/backend.h"           // Backend interface
#include "backend/cpu/dnnl_context.h"  // DnnlContext

namespace dtrain {

namespace cpu {
class ReorderCache;  // cpu_layout.cpp
}

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  std::string name() const override;
  std::string bf16_unavailable() const override;
  std::string bf16_caveat() const override;
  Device device() const override { return Device::cpu; }
  Allocator& allocator() override { return cpu_allocator(); }
  // Host pages committed as they are written, given back with madvise (core/tensor.h).
  Tensor reserve(const Shape& shape) override {
    return Tensor::empty(shape, DType::f32, cpu_lazy_allocator());
  }
  void release(const Tensor& part) override { release_host_pages(part.raw(), part.bytes()); }
  bool releases_memory() const override { return true; }
  void set_num_threads(int threads) override;
  int num_threads() const { return threads_; }
  void synchronize() override {}

  std::unique_ptr<LinearOp> make_linear(const LinearSpec&) override;
  std::unique_ptr<ConvOp> make_conv(const ConvSpec&) override;
  std::unique_ptr<PoolOp> make_pool(const PoolSpec&) override;
  std::unique_ptr<ReluOp> make_relu(const Shape&, DType dtype = DType::f32) override;
  std::unique_ptr<GeluOp> make_gelu(const GeluSpec&) override;
  std::unique_ptr<LrnOp> make_lrn(const LrnSpec&) override;
  std::unique_ptr<BatchNormOp> make_batchnorm(const BatchNormSpec&) override;
  std::unique_ptr<SoftmaxXentOp> make_softmax_xent(const SoftmaxXentSpec&) override;
  std::unique_ptr<DropoutOp> make_dropout(const DropoutSpec&) override;
  std::unique_ptr<EmbeddingOp> make_embedding(const EmbeddingSpec&) override;
  std::unique_ptr<LayerNormOp> make_layer_norm(const LayerNormSpec&) override;
  std::unique_ptr<AttentionOp> make_attention(const AttentionSpec&) override;

  // Blocks of 16 channels on AVX-512 (8 on AVX2) where they divide the channels (cpu_layout.cpp).
  ChannelBlock preferred_block(int64_t channels) const override;
  ChannelBlock conv_output_block(const ConvSpec& spec) const override;
  void reorder(const Tensor& dst, ChannelBlock dst_block, const Tensor& src,
               ChannelBlock src_block) override;
  void copy_channels(const Tensor& dst, int64_t dst_first, const Tensor& src, int64_t src_first,
                     int64_t channels, ChannelBlock block) override;

  void fill_zero(const Tensor& t) override;
  void fill(const Tensor& t, float value) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void copy_rows(const Tensor& dst, int64_t dst_stride, const Tensor& src, int64_t src_stride,
                 int64_t rows, int64_t row_elems) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void add_relu(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void axpy(float alpha, const Tensor& x, const Tensor& y) override;
  void axpby(float alpha, const Tensor& x, float beta, const Tensor& y) override;
  void scale(const Tensor& x, float alpha) override;
  double dot(const Tensor& a, const Tensor& b) override;
  double axpby_dot(float alpha, const Tensor& x, float beta, const Tensor& y,
                   const Tensor& z) override;
  void scale_copy(const Tensor& dst, const Tensor& src, float alpha) override;
  void dc_diagonal(const Tensor& grads, const Tensor& delta, float lambda) override;
  // The pass's host loop on this backend's threads; a sum pass on one thread, summing as it
  // goes (scratch unused).
  void run_pass(const PassKernels& pass, const void* functor, const PassBuffers& buffers) override;
  double run_sum_pass(const PassKernels& pass, const void* functor, const PassBuffers& buffers,
                      const Tensor& scratch) override;
  void add_to_rows(const Tensor& y, const Tensor& row) override;
  void sum_rows(const Tensor& x, const Tensor& out) override;

 private:
  // out = a + b, or max(a + b, 0) with kRelu: one loop for add and add_relu.
  template <bool kRelu>
  void add_into(const Tensor& a, const Tensor& b, const Tensor& out, const char* what);
  template <bool kRelu>
  void add_bf16(const Tensor& a, const Tensor& b, const Tensor& out, const char* what);

  std::unique_ptr<cpu::DnnlContext> ctx_;
  // The oneDNN reorders of casts and bf16 layout changes, made on first use (cpu_layout.cpp;
  // a shared_ptr, so that this header need not see the type to destroy it).
  std::shared_ptr<cpu::ReorderCache> reorders_;
  int threads_ = 1;
};

}  // namespace dtrain
