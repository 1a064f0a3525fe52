// Add: out = a + b (residual connections). Both gradients are the output gradient; the graph
// lets a producer with no other consumer share it, otherwise it is copied.
//
// A ReLU after the add (ResNet's blocks) may be absorbed: out = max(a + b, 0) in one pass, and
// the backward masks the output gradient in place, where the inputs that share it read the
// masked values. The graph fuses it only where that gradient is not the caller's.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

constexpr int kInputs = 2;

class Add final : public Layer {
 public:
  std::string_view type() const override { return "add"; }
  int num_inputs() const override { return kInputs; }
  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    DTRAIN_INPUT_CHECK(in[0].shape == in[1].shape)
        << "layer '" << self << "' adds '" << in[0].name << "' " << in[0].shape.str() << " and '"
        << in[1].name << "' " << in[1].shape.str() << ": the shapes differ";
    shape_ = in[0].shape;
    return shape_;
  }
  // With the ReLU too: the backward masks the gradient in place before the inputs read it.
  bool gradient_passes_through(int) const override { return true; }
  bool absorb_relu() override {
    DTRAIN_CHECK(masks_.empty()) << "add: ReLU fused after prepare()";
    relu_ = true;
    return true;
  }
  bool absorbed_relu_masks_gradient_in_place() const override { return true; }
  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  bool backward_reads_input(int) const override { return false; }
  bool backward_reads_output() const override { return relu_; }
  bool can_run_in_place() const override { return true; }
  void set_dtype(DType dtype) override { dtype_ = dtype; }
  void prepare(Backend& backend, int64_t batch) override {
    if (relu_) masks_.add(batch, backend.make_relu(shape_.with_batch(batch), dtype_));
  }
  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    if (relu_)
      ctx.backend->add_relu(x[0], x[1], y);
    else
      ctx.backend->add(x[0], x[1], y);
  }
  void backward(const RunContext& ctx, std::span<const Tensor>, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (relu_) masks_.at(y.shape()[0])->backward(Tensor(), y, dy, dy);
    for (const Tensor& d : dx)
      if (d.defined()) ctx.backend->copy(d, dy);
  }
  int64_t flops() const override { return shape_.numel() / shape_[0] * (relu_ ? 2 : 1); }

 private:
  DType dtype_ = DType::f32;  // of the activations (set_dtype)
  Shape shape_;
  bool relu_ = false;
  PerBatch<std::unique_ptr<ReluOp>> masks_;
};

}  // namespace

std::unique_ptr<Layer> make_add() {
  return std::make_unique<Add>();
}

LayerEntry add_layer() {
  return layer_row("add", "a + b, element-wise (residual connections)", make_add, kInputs);
}

}  // namespace dtrain
