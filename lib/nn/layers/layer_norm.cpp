// Layer normalisation over the last axis (Ba et al. 2016; PyTorch's nn.LayerNorm over C):
// each row of C features is normalised by its own mean and biased variance, then scaled by a
// learned weight (starts at 1) and shifted by a learned bias (starts at 0; `bias: false` has
// none, nanoGPT's bias=False). Reads [N, C] or a sequence [N, T, C] (N·T rows). The backward
// reads the input and the row statistics the forward keeps, not the output.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct LayerNormOptions {
  double eps = 1e-5;  // PyTorch's default
  bool bias = true;
};

config::Schema<LayerNormOptions> layer_norm_schema() {
  config::Schema<LayerNormOptions> s("layer_norm");
  s.key("eps", &LayerNormOptions::eps, config::real(config::Bounds::above(0)),
        "added to the variance")
      .key("bias", &LayerNormOptions::bias, config::boolean(), "learn a bias");
  return s;
}

class LayerNorm final : public Layer {
 public:
  explicit LayerNorm(const LayerNormOptions& o) : options_(o) {}
  std::string_view type() const override { return "layer_norm"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    shape_ = in[0].shape;
    DTRAIN_INPUT_CHECK(shape_.rank() == 2 || shape_.rank() == 3)
        << "layer '" << self << "' normalises the last axis of [batch, features] or [batch, "
        << "positions, features] but '" << in[0].name << "' gives " << shape_.str();
    features_ = shape_[-1];
    rows_per_sample_ = shape_.numel() / shape_[0] / features_;
    return shape_;
  }
  std::vector<ParamDecl> params() const override {
    std::vector<ParamDecl> p{{"weight", {features_}, {ParamInit::Kind::constant, 1.0f}}};
    if (options_.bias) p.push_back({"bias", {features_}, {ParamInit::Kind::constant, 0.0f}});
    return p;
  }
  void bind(std::span<const Tensor> p, std::span<const Tensor> g,
            std::span<const Tensor>) override {
    gamma_ = p[0], dgamma_ = g[0];
    if (options_.bias) beta_ = p[1], dbeta_ = g[1];
  }
  bool backward_reads_output() const override { return false; }

  // Each row's mean and 1/std, [2, rows] f32 at the build batch, in the graph's arena.
  int64_t saved_bytes() const override { return 4 * 2 * shape_[0] * rows_per_sample_; }
  void bind_saved(const Tensor& bytes) override {
    stats_ = bytes.view_bytes(0, {2, shape_[0] * rows_per_sample_}, DType::f32);
  }

  void prepare(Backend& backend, int64_t batch) override {
    const int64_t rows = batch * rows_per_sample_;
    if (!frozen_dgamma_.defined()) {                             // the build batch: the largest
      if (!stats_.defined()) stats_ = backend.empty({2, rows});  // a graph that plans none
      const Tensor frozen = backend.empty({2, features_});
      frozen_dgamma_ = frozen.slice(0, {features_});
      if (options_.bias) frozen_dbeta_ = frozen.slice(features_, {features_});
    }
    const int64_t most = stats_.shape()[1];
    plans_.add(batch, {backend.make_layer_norm(
                           {rows, features_, static_cast<float>(options_.eps), options_.bias}),
                       stats_.slice(0, {rows}), stats_.slice(most, {rows}), Tensor()});
  }
  void forward(const RunContext&, std::span<const Tensor> x, const Tensor& y) override {
    Plan& p = plans_.at(y.shape()[0]);
    p.op->forward(x[0], gamma_, beta_, y, p.mean, p.rstd);
  }
  void backward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool weights) override {
    Plan& p = plans_.at(y.shape()[0]);
    // The op writes every gradient: scratch for those nobody reads (frozen, or the model input).
    // Pointers, not copies: a Tensor copy allocates its shape.
    const Tensor* dgamma = weights ? &dgamma_ : &frozen_dgamma_;
    const Tensor* dbeta = weights ? &dbeta_ : &frozen_dbeta_;
    if (!dx[0].defined() && !p.dx.defined())
      p.dx = ctx.backend->empty(y.shape());  // once per batch size
    p.op->backward(x[0], dy, gamma_, p.mean, p.rstd, dx[0].defined() ? dx[0] : p.dx, *dgamma,
                   *dbeta);
  }
  // Per element: −mean, ·rstd, ·gamma, +beta, and the two row reductions.
  int64_t flops() const override { return 6 * rows_per_sample_ * features_; }

 private:
  struct Plan {
    std::unique_ptr<LayerNormOp> op;
    Tensor mean, rstd;  // views of stats_
    Tensor dx;          // scratch input gradient, made when first needed
  };
  LayerNormOptions options_;
  Shape shape_;
  int64_t features_ = 0, rows_per_sample_ = 0;
  Tensor gamma_, beta_, dgamma_, dbeta_;
  Tensor stats_;  // [2, rows at the build batch]: means, then reciprocal deviations
  Tensor frozen_dgamma_, frozen_dbeta_;  // where a frozen layer's parameter gradients go
  PerBatch<Plan> plans_;
};

}  // namespace

LayerEntry layer_norm_layer() {
  return layer_row("layer_norm",
                   "normalises each row of the last axis to zero mean and unit variance, then "
                   "scales and shifts it (PyTorch's nn.LayerNorm)",
                   layer_norm_schema(),
                   [](const LayerNormOptions& o) { return std::make_unique<LayerNorm>(o); });
}

}  // namespace dtrain
