// StubBackend: a Backend for tests whose every op throws "unused". A test derives from it and
// overrides only the ops it means to exercise or fake, so a new Backend op is added to the CPU
// and CUDA backends only: here it is unused until a test overrides it. Only the pure virtual
// ops are stubbed; the ones with a default (upload, reorder, add_relu, ...) keep it, and it
// reaches a stub unless the test overrides what the default calls.
#pragma once
#include <memory>     // unique_ptr: the op factories
#include <stdexcept>  // logic_error
#include <string>

#include "backend/backend.h"

namespace dtrain::test {

class StubBackend : public Backend {
 public:
  // An op the test did not override was called: the test reached further than it meant to.
  [[noreturn]] static void unused(const char* op) {
    throw std::logic_error(std::string("StubBackend: ") + op + " is unused in this test");
  }

  // Host memory, nothing to wait for: what most fakes want.
  std::string name() const override { return "stub"; }
  std::string bf16_unavailable() const override { return "stub"; }
  Device device() const override { return Device::cpu; }
  Allocator& allocator() override { return cpu_allocator(); }
  void set_num_threads(int) override {}
  void synchronize() override {}

  std::unique_ptr<LinearOp> make_linear(const LinearSpec&) override { unused("make_linear"); }
  std::unique_ptr<ConvOp> make_conv(const ConvSpec&) override { unused("make_conv"); }
  std::unique_ptr<PoolOp> make_pool(const PoolSpec&) override { unused("make_pool"); }
  std::unique_ptr<ReluOp> make_relu(const Shape&, DType = DType::f32) override {
    unused("make_relu");
  }
  std::unique_ptr<GeluOp> make_gelu(const GeluSpec&) override { unused("make_gelu"); }
  std::unique_ptr<LrnOp> make_lrn(const LrnSpec&) override { unused("make_lrn"); }
  std::unique_ptr<BatchNormOp> make_batchnorm(const BatchNormSpec&) override {
    unused("make_batchnorm");
  }
  std::unique_ptr<SoftmaxXentOp> make_softmax_xent(const SoftmaxXentSpec&) override {
    unused("make_softmax_xent");
  }
  std::unique_ptr<DropoutOp> make_dropout(const DropoutSpec&) override { unused("make_dropout"); }
  std::unique_ptr<EmbeddingOp> make_embedding(const EmbeddingSpec&) override {
    unused("make_embedding");
  }
  std::unique_ptr<LayerNormOp> make_layer_norm(const LayerNormSpec&) override {
    unused("make_layer_norm");
  }
  std::unique_ptr<AttentionOp> make_attention(const AttentionSpec&) override {
    unused("make_attention");
  }

  void fill_zero(const Tensor&) override { unused("fill_zero"); }
  void fill(const Tensor&, float) override { unused("fill"); }
  void copy(const Tensor&, const Tensor&) override { unused("copy"); }
  void copy_rows(const Tensor&, int64_t, const Tensor&, int64_t, int64_t, int64_t) override {
    unused("copy_rows");
  }
  void add(const Tensor&, const Tensor&, const Tensor&) override { unused("add"); }
  void axpy(float, const Tensor&, const Tensor&) override { unused("axpy"); }
  void axpby(float, const Tensor&, float, const Tensor&) override { unused("axpby"); }
  void scale(const Tensor&, float) override { unused("scale"); }
  double dot(const Tensor&, const Tensor&) override { unused("dot"); }
  void dc_diagonal(const Tensor&, const Tensor&, float) override { unused("dc_diagonal"); }
  void run_pass(const PassKernels&, const void*, const PassBuffers&) override {
    unused("run_pass");
  }
  double run_sum_pass(const PassKernels&, const void*, const PassBuffers&, const Tensor&) override {
    unused("run_sum_pass");
  }
  void add_to_rows(const Tensor&, const Tensor&) override { unused("add_to_rows"); }
  void sum_rows(const Tensor&, const Tensor&) override { unused("sum_rows"); }
};

}  // namespace dtrain::test
