// Cast: its input in another dtype (f32 ↔ bf16), as a reorder on the backend. Not a row of the
// layer table: the graph inserts one wherever a layer reads a tensor in another dtype than it
// was made in (mixed precision, nn/graph_precision.cpp), and its backward casts the gradient
// back. It keeps its input's layout, so a blocked CNN trunk stays blocked across it.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

class Cast final : public Layer {
 public:
  explicit Cast(DType to) : to_(to) {}
  std::string_view type() const override { return to_ == DType::bf16 ? "cast bf16" : "cast f32"; }
  Shape infer(const std::string&, std::span<const InputInfo> in) override { return in[0].shape; }
  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  void set_layouts(std::span<const ChannelBlock>, ChannelBlock out) override { block_ = out; }
  bool backward_reads_input(int) const override { return false; }
  bool backward_reads_output() const override { return false; }

  void prepare(Backend&, int64_t) override {}
  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    ctx.backend->reorder(y, block_, x[0], block_);
  }
  void backward(const RunContext& ctx, std::span<const Tensor>, const Tensor&, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (dx[0].defined()) ctx.backend->reorder(dx[0], block_, dy, block_);
  }

 private:
  DType to_;
  ChannelBlock block_ = 1;
};

}  // namespace

std::unique_ptr<Layer> make_cast(DType to) {
  return std::make_unique<Cast>(to);
}

}  // namespace dtrain
