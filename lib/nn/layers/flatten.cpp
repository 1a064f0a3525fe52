// Flatten: [N, ...] → [N, features]. Usually a view of its input: no memory, no work in
// forward, and the graph lets the producer share this node's gradient buffer when it has no
// other consumer, so the backward is free too (otherwise a copy). After a channel-blocked
// chain (ops.h ChannelBlock) it is where the activations return to plain NCHW order: a reorder
// each way, into memory of its own — unless the input is [N, C, 1, 1], whose blocked and
// plain orders coincide.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

class Flatten final : public Layer {
 public:
  std::string_view type() const override { return "flatten"; }
  Shape infer(const std::string&, std::span<const InputInfo> in) override {
    in_shape_ = in[0].shape;
    const Shape& s = in_shape_;
    return s.rank() == 0 ? Shape{1} : Shape{s[0], s.numel() / s[0]};
  }
  Shape input_view(int, const Shape& s) const override { return {s[0], s.numel() / s[0]}; }
  bool output_is_view() const override { return !converts(); }
  bool gradient_passes_through(int) const override { return !converts(); }
  LayoutRule layout_rule() const override { return LayoutRule::chooses; }
  void set_layouts(std::span<const ChannelBlock> in, ChannelBlock) override { in_block_ = in[0]; }
  bool backward_reads_input(int) const override { return false; }
  bool backward_reads_output() const override { return false; }

  void prepare(Backend&, int64_t) override {}
  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    if (converts()) ctx.backend->reorder(as_input(out_, y), 1, as_input(in_, x[0]), in_block_);
  }
  void backward(const RunContext& ctx, std::span<const Tensor>, const Tensor&, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (!dx[0].defined()) return;
    if (converts()) {
      ctx.backend->reorder(as_input(dx_, dx[0]), in_block_, as_input(dy_, dy), 1);
    } else {
      ctx.backend->copy(dx[0], dy);
    }
  }

 private:
  bool converts() const {
    return in_block_ > 1 && !(in_shape_.rank() == 4 && in_shape_[2] == 1 && in_shape_[3] == 1);
  }
  // `t` seen as the 4-D input shape, cached per tensor (no allocation in steady state).
  struct View {
    const void* base = nullptr;
    int64_t batch = 0;
    Tensor view;
  };
  const Tensor& as_input(View& cache, const Tensor& t) const {
    if (cache.base != t.raw() || cache.batch != t.shape()[0]) {
      cache.view = t.reshape(in_shape_.with_batch(t.shape()[0]));
      cache.base = t.raw();
      cache.batch = t.shape()[0];
    }
    return cache.view;
  }

  Shape in_shape_;
  ChannelBlock in_block_ = 1;
  View in_, out_, dx_, dy_;
};

}  // namespace

LayerEntry flatten_layer() {
  return layer_row("flatten", "[batch, ...] → [batch, features]",
                   [] { return std::make_unique<Flatten>(); });
}

}  // namespace dtrain
