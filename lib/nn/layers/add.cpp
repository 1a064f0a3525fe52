// Add: out = a + b (residual connections). Both gradients are the output gradient; the graph
// lets a producer with no other consumer share it, otherwise it is copied.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

class Add final : public Layer {
 public:
  std::string_view type() const override { return "add"; }
  int num_inputs() const override { return 2; }
  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    DTRAIN_INPUT_CHECK(in[0].shape == in[1].shape)
        << "layer '" << self << "' adds '" << in[0].name << "' " << in[0].shape.str() << " and '"
        << in[1].name << "' " << in[1].shape.str() << ": the shapes differ";
    shape_ = in[0].shape;
    return shape_;
  }
  bool gradient_passes_through(int) const override { return true; }
  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  bool backward_reads_input(int) const override { return false; }
  bool backward_reads_output() const override { return false; }
  bool can_run_in_place() const override { return true; }
  void prepare(Backend&, int64_t) override {}
  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    ctx.backend->add(x[0], x[1], y);
  }
  void backward(const RunContext& ctx, std::span<const Tensor>, const Tensor&, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    for (const Tensor& d : dx)
      if (d.defined()) ctx.backend->copy(d, dy);
  }
  int64_t flops() const override { return shape_.numel() / shape_[0]; }

 private:
  Shape shape_;
};

}  // namespace

std::unique_ptr<Layer> make_add() {
  return std::make_unique<Add>();
}

}  // namespace dtrain
