// Dropout (inverted). The mask of training step t comes from the counter RNG with this layer's
// own stream, so it is the same on every backend and thread count and needs no RNG state.
// Identity in evaluation mode.
#include "core/rng.h"  // stream_id
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct DropoutOptions {
  double p = 0.5;
};

config::Schema<DropoutOptions> dropout_schema() {
  config::Schema<DropoutOptions> s("dropout");
  s.key("p", &DropoutOptions::p, config::real(config::Bounds::closed_open(0, 1)),
        "probability of zeroing an element");
  return s;
}

class Dropout final : public Layer {
 public:
  explicit Dropout(const DropoutOptions& o) : p_(static_cast<float>(o.p)) {}
  std::string_view type() const override { return "dropout"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    shape_ = in[0].shape;
    return shape_;
  }
  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  void set_layouts(std::span<const ChannelBlock> in, ChannelBlock) override { block_ = in[0]; }
  void set_dtype(DType dtype) override { dtype_ = dtype; }
  bool backward_reads_input(int) const override { return false; }
  bool backward_reads_output() const override { return false; }

  // The mask, one byte per element, in the graph's arena.
  int64_t saved_bytes() const override { return shape_.numel(); }
  void bind_saved(const Tensor& bytes) override { mask_ = bytes.view_bytes(0, shape_, DType::u8); }

  void prepare(Backend& backend, int64_t batch) override {
    const Shape shape = shape_.with_batch(batch);
    if (!mask_.defined()) mask_ = backend.empty(shape, DType::u8);  // a graph that plans none
    plans_.add(batch, {backend.make_dropout({shape, block_, dtype_}), mask_.narrow_batch(batch)});
  }
  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    trained_ = ctx.training;
    if (!ctx.training) {
      ctx.backend->copy(y, x[0]);
      return;
    }
    Plan& p = plans_.at(y.shape()[0]);
    // One stream per (node, step): node index in the high bits, the step in the low 32.
    const uint64_t sub = (static_cast<uint64_t>(ctx.node) << 32) + (ctx.step & 0xffffffffULL);
    p.op->forward(x[0], y, p.mask, p_, ctx.seed, stream_id(RngStream::dropout, sub));
  }
  void backward(const RunContext& ctx, std::span<const Tensor>, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (!dx[0].defined()) return;
    if (!trained_) {
      ctx.backend->copy(dx[0], dy);
      return;
    }
    Plan& p = plans_.at(y.shape()[0]);
    p.op->backward(dy, p.mask, p_, dx[0]);
  }
  int64_t flops() const override { return shape_.numel() / shape_[0]; }

 private:
  DType dtype_ = DType::f32;  // of the activations (set_dtype)
  struct Plan {
    std::unique_ptr<DropoutOp> op;
    Tensor mask;
  };
  float p_;
  Shape shape_;
  ChannelBlock block_ = 1;
  bool trained_ = true;
  Tensor mask_;
  PerBatch<Plan> plans_;
};

}  // namespace

LayerEntry dropout_layer() {
  return layer_row("dropout",
                   "in training, zeroes each element with probability p and scales the rest by "
                   "1/(1 − p); the identity in evaluation",
                   dropout_schema(),
                   [](const DropoutOptions& o) { return std::make_unique<Dropout>(o); });
}

}  // namespace dtrain
