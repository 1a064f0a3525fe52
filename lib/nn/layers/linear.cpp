// Linear: y = x·wᵀ + b on [batch, features]; a 4-D input is read as its flattened view, and a
// sequence [N, T, C] is transformed position by position (PyTorch's nn.Linear on the last
// axis: one GEMM of N·T rows, output [N, T, out]). May absorb the ReLU that follows it (the op
// then applies it, see ops.h).
//
// `tie_weight: <embedding>` makes it a tied output head (GPT-2's lm_head): it computes with
// that embedding's table [vocab, C] as its [out, in] weight and has no weight of its own. Its
// backward writes the table's gradient first and the embedding's, which runs later, adds its
// part (the graph arranges it: Layer::weight_tie).
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct LinearOptions : InitOptions {
  int64_t out_features = 0;            // required
  std::optional<int64_t> in_features;  // none: inferred from the input
  bool bias = true;
  std::optional<std::string> tie_weight;  // an embedding whose table is the weight
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
      .key("bias", &LinearOptions::bias, config::boolean(), "learn a bias")
      .key("tie_weight", &LinearOptions::tie_weight, config::optional_of(config::nonempty_text()),
           "name of an earlier embedding layer whose [vocab, C] table is the weight (a tied "
           "output head: no weight of its own, the gradients of both uses add up)");
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
    // A sequence: every position is a row of its own.
    positions_ = s.rank() == 3 ? s[1] : 1;
    in_features_ = s.rank() == 3 ? s[2] : s.numel() / s[0];
    DTRAIN_INPUT_CHECK(!config_.in_features || *config_.in_features == in_features_)
        << "layer '" << self << "' expects " << *config_.in_features << " input features but '"
        << in[0].name << "' gives " << s.str() << " (= " << in_features_ << ")";
    if (s.rank() == 3) return {s[0], s[1], config_.out_features};
    return {s[0], config_.out_features};
  }
  Shape input_view(int, const Shape& s) const override {
    if (s.rank() == 3) return s;  // the op reads it as [N·T, C]
    return {s[0], s.numel() / s[0]};
  }

  std::optional<WeightTie> weight_tie() const override {
    if (!config_.tie_weight) return std::nullopt;
    return WeightTie{*config_.tie_weight, "tie_weight", {config_.out_features, in_features_}};
  }
  void bind_tied(const Tensor& weight, const Tensor& gradient) override {
    w_ = weight, dw_ = gradient;
  }

  std::vector<ParamDecl> params() const override {
    std::vector<ParamDecl> p;
    if (!config_.tie_weight)
      p.push_back({"weight",
                   {config_.out_features, in_features_},
                   weight_init(config_, in_features_, config_.out_features)});
    if (config_.bias)
      p.push_back({"bias", {config_.out_features}, bias_init(config_, in_features_)});
    return p;
  }
  void bind(std::span<const Tensor> p, std::span<const Tensor> g,
            std::span<const Tensor>) override {
    size_t k = 0;
    if (!config_.tie_weight) w_ = p[k], dw_ = g[k], ++k;
    if (config_.bias) b_ = p[k], db_ = g[k];
  }

  bool backward_reads_output() const override { return relu_; }
  bool absorb_relu() override {
    DTRAIN_CHECK(ops_.empty()) << "linear: ReLU fused after prepare()";
    relu_ = true;
    return true;
  }

  void set_dtype(DType dtype) override { dtype_ = dtype; }
  void prepare(Backend& backend, int64_t batch) override {
    ops_.add(batch, backend.make_linear({batch * positions_, in_features_, config_.out_features,
                                         config_.bias, relu_, dtype_}));
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
    return positions_ *
           (2 * in_features_ * config_.out_features + (config_.bias ? config_.out_features : 0));
  }

 private:
  LinearOptions config_;
  int64_t in_features_ = 0;
  int64_t positions_ = 1;  // T of a sequence input [N, T, C]
  bool relu_ = false;      // absorbed the following ReLU
  DType dtype_ = DType::f32;
  Tensor w_, b_, dw_, db_;
  PerBatch<std::unique_ptr<LinearOp>> ops_;
};

}  // namespace

LayerEntry linear_layer() {
  return layer_row("linear",
                   "y = x·wᵀ + b on [batch, features] (a 4-D input is read flattened, a sequence "
                   "[N, T, C] position by position)",
                   linear_schema(),
                   [](const LinearOptions& o) { return std::make_unique<Linear>(o); });
}

}  // namespace dtrain
