// ReLU. The backward reads the output (y > 0 ⇔ x > 0), which every backend supports. When the
// producing Linear or Conv2d absorbed it (Graph fuses them at build), it is a view of that
// layer's output and does nothing: the producer applies max(·, 0) and the mask.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

class Relu final : public Layer {
 public:
  std::string_view type() const override { return "relu"; }
  Shape infer(const std::string&, std::span<const InputInfo> in) override {
    shape_ = in[0].shape;
    return shape_;
  }
  bool is_relu() const override { return true; }
  void mark_absorbed() override { absorbed_ = true; }
  bool absorbed() const override { return absorbed_; }
  bool output_is_view() const override { return absorbed_; }
  bool gradient_passes_through(int) const override { return absorbed_; }
  // Element-wise on any layout; the backward reads only the output (y > 0 ⇔ x > 0).
  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  bool backward_reads_input(int) const override { return false; }
  bool backward_reads_output() const override { return !absorbed_; }
  bool can_run_in_place() const override { return !absorbed_; }
  void set_dtype(DType dtype) override { dtype_ = dtype; }

  void prepare(Backend& backend, int64_t batch) override {
    if (!absorbed_) ops_.add(batch, backend.make_relu(shape_.with_batch(batch), dtype_));
  }
  void forward(const RunContext&, std::span<const Tensor> x, const Tensor& y) override {
    if (!absorbed_) ops_.at(y.shape()[0])->forward(x[0], y);
  }
  void backward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (!dx[0].defined()) return;
    if (absorbed_) {
      // The graph shares the gradient buffer with the producer; a copy only if it did not.
      ctx.backend->copy(dx[0], dy);
      return;
    }
    ops_.at(y.shape()[0])->backward(x[0], y, dy, dx[0]);
  }
  int64_t flops() const override { return shape_.numel() / shape_[0]; }

 private:
  Shape shape_;
  bool absorbed_ = false;
  DType dtype_ = DType::f32;
  PerBatch<std::unique_ptr<ReluOp>> ops_;
};

}  // namespace

std::unique_ptr<Layer> make_relu() {
  return std::make_unique<Relu>();
}

LayerEntry relu_layer() {
  return layer_row("relu",
                   "max(x, 0), element-wise (fused into the layer before it where it can be)",
                   make_relu);
}

}  // namespace dtrain
