// ReLU. The backward reads the output (y > 0 ⇔ x > 0), which every backend supports.
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
  void prepare(Backend& backend, int64_t batch) override {
    ops_.add(batch, backend.make_relu(shape_.with_batch(batch)));
  }
  void forward(const RunContext&, std::span<const Tensor> x, const Tensor& y) override {
    ops_.at(y.shape()[0])->forward(x[0], y);
  }
  void backward(const RunContext&, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (dx[0].defined()) ops_.at(y.shape()[0])->backward(x[0], y, dy, dx[0]);
  }
  int64_t flops() const override { return shape_.numel() / shape_[0]; }

 private:
  Shape shape_;
  PerBatch<std::unique_ptr<ReluOp>> ops_;
};

}  // namespace

std::unique_ptr<Layer> make_relu() {
  return std::make_unique<Relu>();
}

}  // namespace dtrain
