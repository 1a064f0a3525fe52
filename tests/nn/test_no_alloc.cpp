// The steady state allocates nothing: forward/backward on a backend whose ops do nothing, with
// every heap allocation of the process counted (the real backends' own bookkeeping, e.g.
// oneDNN argument maps, is theirs to keep light).
#include <atomic>
#include <cstdlib>
#include <new>

#include "../support/stub_backend.h"  // StubBackend
#include "helpers.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  void* p = std::malloc(n == 0 ? 1 : n);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

namespace dtrain {
namespace {

struct NopLinear final : LinearOp {
  void forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
  void backward_data(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
  void backward_weights(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&) override {}
};
struct NopConv final : ConvOp {
  void forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
  void backward_data(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
  void backward_weights(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&) override {}
};
struct NopPool final : PoolOp {
  size_t workspace_bytes() const override { return 64; }
  void forward(const Tensor&, const Tensor&, const Tensor&, bool) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                const Tensor&) override {}
};
struct NopRelu final : ReluOp {
  void forward(const Tensor&, const Tensor&) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
};
struct NopLrn final : LrnOp {
  size_t workspace_bytes() const override { return 64; }
  void forward(const Tensor&, const Tensor&, const Tensor&, bool) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                const Tensor&) override {}
};
struct NopBatchNorm final : BatchNormOp {
  size_t workspace_bytes() const override { return 64; }
  void forward_training(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&, const Tensor&) override {}
  void forward_inference(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                const Tensor&) override {}
};
struct NopXent final : SoftmaxXentOp {
  void forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, float) override {}
};
struct NopDropout final : DropoutOp {
  void forward(const Tensor&, const Tensor&, const Tensor&, float, uint64_t, uint64_t) override {}
  void backward(const Tensor&, const Tensor&, float, const Tensor&) override {}
};

struct NopEmbedding final : EmbeddingOp {
  void forward(const Tensor&, const Tensor&, const Tensor&) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, bool) override {}
};
struct NopLayerNorm final : LayerNormOp {
  void forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
               const Tensor&) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                const Tensor&, const Tensor&, const Tensor&) override {}
};
struct NopAttention final : AttentionOp {
  size_t workspace_bytes() const override { return 64; }
  void forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, uint64_t,
               uint64_t) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, uint64_t,
                uint64_t, const Tensor&) override {}
};
struct NopGelu final : GeluOp {
  void forward(const Tensor&, const Tensor&) override {}
  void backward(const Tensor&, const Tensor&, const Tensor&) override {}
};

// Every op the models below reach does nothing; the rest stay unused.
class NopBackend final : public test::StubBackend {
 public:
  std::unique_ptr<LinearOp> make_linear(const LinearSpec&) override {
    return std::make_unique<NopLinear>();
  }
  std::unique_ptr<ConvOp> make_conv(const ConvSpec&) override {
    return std::make_unique<NopConv>();
  }
  std::unique_ptr<PoolOp> make_pool(const PoolSpec&) override {
    return std::make_unique<NopPool>();
  }
  std::unique_ptr<ReluOp> make_relu(const Shape&, DType = DType::f32) override {
    return std::make_unique<NopRelu>();
  }
  std::unique_ptr<LrnOp> make_lrn(const LrnSpec&) override { return std::make_unique<NopLrn>(); }
  std::unique_ptr<BatchNormOp> make_batchnorm(const BatchNormSpec&) override {
    return std::make_unique<NopBatchNorm>();
  }
  std::unique_ptr<SoftmaxXentOp> make_softmax_xent(const SoftmaxXentSpec&) override {
    return std::make_unique<NopXent>();
  }
  std::unique_ptr<DropoutOp> make_dropout(const DropoutSpec&) override {
    return std::make_unique<NopDropout>();
  }
  std::unique_ptr<EmbeddingOp> make_embedding(const EmbeddingSpec&) override {
    return std::make_unique<NopEmbedding>();
  }
  std::unique_ptr<LayerNormOp> make_layer_norm(const LayerNormSpec&) override {
    return std::make_unique<NopLayerNorm>();
  }
  std::unique_ptr<AttentionOp> make_attention(const AttentionSpec&) override {
    return std::make_unique<NopAttention>();
  }
  std::unique_ptr<GeluOp> make_gelu(const GeluSpec&) override {
    return std::make_unique<NopGelu>();
  }
  void add_to_rows(const Tensor&, const Tensor&) override {}
  void sum_rows(const Tensor&, const Tensor&) override {}
  void fill_zero(const Tensor&) override {}
  void copy_channels(const Tensor&, int64_t, const Tensor&, int64_t, int64_t,
                     ChannelBlock) override {}
  void fill(const Tensor&, float) override {}
  void copy(const Tensor&, const Tensor&) override {}
  void copy_rows(const Tensor&, int64_t, const Tensor&, int64_t, int64_t, int64_t) override {}
  void add(const Tensor&, const Tensor&, const Tensor&) override {}
  void add_relu(const Tensor&, const Tensor&, const Tensor&) override {}
  void axpy(float, const Tensor&, const Tensor&) override {}
  void axpby(float, const Tensor&, float, const Tensor&) override {}
};

}  // namespace
}  // namespace dtrain

using namespace dtrain;
using namespace dtrain::test;

TEST_CASE("forward and backward allocate nothing at steady state") {
  NopBackend backend;
  const char* specs[] = {"{name: resnet20}", "{name: cifar_cnn, lrn: true}",
                         "{name: alexnet, lrn: true}", "{name: resnet18}"};
  for (const char* spec : specs) {
    const std::string name = spec;
    CAPTURE(name);
    const ModelInput input{{3, 64, 64}, 10, 4};
    auto m = build_model(backend, YAML::Load(spec), input, 1);
    m->freeze_first(1);  // also the frozen paths (batch-norm scratch gradients)
    Tensor a = Tensor::zeros({4, 3, 64, 64}), b = Tensor::zeros({4, 3, 64, 64});
    Tensor labels = Tensor::zeros({4}, DType::i32);
    Tensor a2 = a.narrow_batch(2), labels2 = labels.narrow_batch(2);
    int64_t last = -1;
    const std::function<void(int64_t)> on_ready = [&](int64_t offset) { last = offset; };
    auto step = [&](const Tensor& x, const Tensor& y) {
      m->set_training(true);
      m->forward(x, y);
      m->backward(0.25f, on_ready);
      m->last_stats();
      m->set_training(false);
      m->forward(x, y);
      m->last_stats();
    };
    step(a, labels);  // warm-up: plans for both batch sizes
    step(a2, labels2);
    step(b, labels);
    allocations = 0;
    counting = true;
    for (int i = 0; i < 3; ++i) {
      step(a, labels);
      step(b, labels);  // another input buffer: views are rebound without allocating
      step(a2, labels2);
    }
    counting = false;
    CHECK(allocations.load() == 0);
    CHECK(last == m->trainable_offset());
  }
}

TEST_CASE("a GPT's forward and backward allocate nothing at steady state") {
  NopBackend backend;
  for (const char* spec : {"{name: gpt, n_layer: 2, n_embd: 32, dropout: 0.1}",
                           "{name: gpt, n_layer: 2, n_embd: 32, tie_weights: false}"}) {
    const std::string name = spec;
    CAPTURE(name);
    auto m = build_model(backend, YAML::Load(spec), {{8}, 11, 4}, 1);
    m->freeze_first(1);  // the frozen paths: the table (and with it the tied head), ln_1
    Tensor a = Tensor::zeros({4, 8}), b = Tensor::zeros({4, 8});
    Tensor labels = Tensor::zeros({4, 8}, DType::i32);
    Tensor a2 = a.narrow_batch(2), labels2 = labels.narrow_batch(2);
    auto step = [&](const Tensor& x, const Tensor& y) {
      m->set_training(true);
      m->forward(x, y);
      m->backward(0.25f, [](int64_t) {});
      m->last_stats();
      m->set_training(false);
      m->forward(x, y);
      m->last_stats();
    };
    step(a, labels);  // warm-up: plans for both batch sizes
    step(a2, labels2);
    step(b, labels);
    allocations = 0;
    counting = true;
    for (int i = 0; i < 3; ++i) {
      step(a, labels);
      step(b, labels);
      step(a2, labels2);
    }
    counting = false;
    CHECK(allocations.load() == 0);
  }
}
