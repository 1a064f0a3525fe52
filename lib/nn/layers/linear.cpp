// Linear: y = x·wᵀ + b on [batch, features]; a 4-D input is read as its flattened view. May
// absorb the ReLU that follows it (the op then applies it, see ops.h).
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct LinearOptions : InitOptions {
  int64_t out_features = 0;            // required
  std::optional<int64_t> in_features;  // none: inferred from the input
  bool bias = true;
};

config::Schema<LinearOptions> linear_schema() {
  using config::Bounds;
  config::Schema<LinearOptions> s("linear");
  s.key("out_features", &LinearOptions::out_features, config::integer64(Bounds::above(0)),
        "outputs")
      .required("the number of outputs")
      .key("in_features", &LinearOptions::in_features,
           config::optional_of(config::integer64(Bounds::above(0))),
           "inputs (checked against the graph when given)")
      .key("bias", &LinearOptions::bias, config::boolean(), "learn a bias");
  return with_init_keys(s);
}

class Linear final : public Layer {
 public:
  explicit Linear(const LinearOptions& c) : config_(c) {}
  std::string_view type() const override { return "linear"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() >= 2)
        << "layer '" << self << "' expects a [batch, features] input but '" << in[0].name
        << "' gives " << s.str();
    in_features_ = s.numel() / s[0];
    DTRAIN_INPUT_CHECK(!config_.in_features || *config_.in_features == in_features_)
        << "layer '" << self << "' expects " << *config_.in_features << " input features but '"
        << in[0].name << "' gives " << s.str() << " (= " << in_features_ << ")";
    return {s[0], config_.out_features};
  }
  Shape input_view(int, const Shape& s) const override { return {s[0], s.numel() / s[0]}; }

  std::vector<ParamDecl> params() const override {
    std::vector<ParamDecl> p{{"weight",
                              {config_.out_features, in_features_},
                              weight_init(config_, in_features_, config_.out_features)}};
    if (config_.bias)
      p.push_back({"bias", {config_.out_features}, bias_init(config_, in_features_)});
    return p;
  }
  void bind(std::span<const Tensor> p, std::span<const Tensor> g,
            std::span<const Tensor>) override {
    w_ = p[0], dw_ = g[0];
    if (config_.bias) b_ = p[1], db_ = g[1];
  }

  bool backward_reads_output() const override { return relu_; }
  bool absorb_relu() override {
    DTRAIN_CHECK(ops_.empty()) << "linear: ReLU fused after prepare()";
    relu_ = true;
    return true;
  }

  void prepare(Backend& backend, int64_t batch) override {
    ops_.add(batch,
             backend.make_linear({batch, in_features_, config_.out_features, config_.bias, relu_}));
  }
  void forward(const RunContext&, std::span<const Tensor> x, const Tensor& y) override {
    ops_.at(y.shape()[0])->forward(x[0], w_, b_, y);
  }
  void backward(const RunContext&, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool weights) override {
    LinearOp& op = *ops_.at(y.shape()[0]);
    if (weights) op.backward_weights(x[0], y, dy, dw_, db_);
    if (dx[0].defined()) op.backward_data(y, dy, w_, dx[0]);
  }
  int64_t flops() const override {
    return 2 * in_features_ * config_.out_features + (config_.bias ? config_.out_features : 0);
  }

 private:
  LinearOptions config_;
  int64_t in_features_ = 0;
  bool relu_ = false;  // absorbed the following ReLU
  Tensor w_, b_, dw_, db_;
  PerBatch<std::unique_ptr<LinearOp>> ops_;
};

}  // namespace

LayerEntry linear_layer() {
  return layer_row("linear", "y = x·wᵀ + b on [batch, features] (a 4-D input is read flattened)",
                   linear_schema(),
                   [](const LinearOptions& o) { return std::make_unique<Linear>(o); });
}

}  // namespace dtrain
