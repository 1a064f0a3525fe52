// GELU, x·Φ(x) (Hendrycks and Gimpel 2016), as PyTorch's nn.GELU: exact, Φ through erf, or with
// `approximate: tanh` its tanh form ½x(1 + tanh(√(2/π)(x + 0.044715x³))). Element-wise on any
// layout; the backward reads the input (gelu' is not a function of the output).
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct GeluOptions {
  GeluApproximation approximate = GeluApproximation::none;  // PyTorch's default: exact
};

config::Schema<GeluOptions> gelu_schema() {
  config::Schema<GeluOptions> s("gelu");
  s.key("approximate", &GeluOptions::approximate,
        config::enum_choice<GeluApproximation>(
            {{"none", GeluApproximation::none}, {"tanh", GeluApproximation::tanh}}),
        "none: Φ through erf; tanh: PyTorch's tanh approximation");
  return s;
}

class Gelu final : public Layer {
 public:
  explicit Gelu(const GeluOptions& o) : options_(o) {}
  std::string_view type() const override { return "gelu"; }
  Shape infer(const std::string&, std::span<const InputInfo> in) override {
    shape_ = in[0].shape;
    return shape_;
  }
  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  bool backward_reads_output() const override { return false; }
  void set_dtype(DType dtype) override { dtype_ = dtype; }

  void prepare(Backend& backend, int64_t batch) override {
    ops_.add(batch, backend.make_gelu({shape_.with_batch(batch), options_.approximate, dtype_}));
  }
  void forward(const RunContext&, std::span<const Tensor> x, const Tensor& y) override {
    ops_.at(y.shape()[0])->forward(x[0], y);
  }
  void backward(const RunContext&, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (dx[0].defined()) ops_.at(y.shape()[0])->backward(x[0], dy, dx[0]);
  }
  // Per element: x/√2, erf, +1, two products; the tanh form: x³ (2), ·κ, +x, ·√(2/π), tanh,
  // +1, two products (erf and tanh count as one).
  int64_t flops() const override {
    const int64_t per = options_.approximate == GeluApproximation::tanh ? 9 : 5;
    return per * (shape_.numel() / shape_[0]);
  }

 private:
  DType dtype_ = DType::f32;  // of the activations (set_dtype)
  GeluOptions options_;
  Shape shape_;
  PerBatch<std::unique_ptr<GeluOp>> ops_;
};

}  // namespace

LayerEntry gelu_layer() {
  return layer_row("gelu",
                   "x·Φ(x), element-wise: PyTorch's GELU, exact or (approximate: tanh) its tanh "
                   "form",
                   gelu_schema(), [](const GeluOptions& o) { return std::make_unique<Gelu>(o); });
}

}  // namespace dtrain
