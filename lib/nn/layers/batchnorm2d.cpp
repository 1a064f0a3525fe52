// BatchNorm2d over N, H, W per channel ([N, C] inputs are treated as H = W = 1).
// Training normalises with the batch statistics and updates the running estimates as PyTorch:
//   running_mean ← (1 − m)·running_mean + m·mean,  running_var ← (1 − m)·running_var +
//   m·var·n/(n−1)
// (the unbiased variance, n = N·H·W). Evaluation uses the running estimates, which are buffers
// (not trained, not in the gradient), initialised to 0 and 1; weight and bias start at 1 and 0.
// It may absorb the ReLU that follows (the op normalises and clamps in one pass and masks the
// gradient in its backward) and runs on whatever layout its input has.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 − m)·running + m·batch, as PyTorch
};

config::Schema<BatchNormOptions> batchnorm_schema() {
  config::Schema<BatchNormOptions> s("batchnorm2d");
  s.key("eps", &BatchNormOptions::eps, config::real(config::Bounds::above(0)),
        "added to the variance")
      .key("momentum", &BatchNormOptions::momentum, config::real(config::Bounds::open_closed(0, 1)),
           "running statistics' update factor");
  return s;
}

class BatchNorm2d final : public Layer {
 public:
  explicit BatchNorm2d(const BatchNormOptions& c) : config_(c) {}
  std::string_view type() const override { return "batchnorm2d"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() == 4 || s.rank() == 2)
        << "layer '" << self << "' expects a [batch, channels, height, width] or [batch, channels]"
        << " input but '" << in[0].name << "' gives " << s.str();
    spec_ = {s[0], s[1], s.rank() == 4 ? s[2] : 1, s.rank() == 4 ? s[3] : 1,
             static_cast<float>(config_.eps)};
    shape_ = s;
    return s;
  }

  std::vector<ParamDecl> params() const override {
    return {{"weight", {spec_.channels}, {ParamInit::Kind::constant, 1.0f}},
            {"bias", {spec_.channels}, {ParamInit::Kind::constant, 0.0f}}};
  }
  std::vector<ParamDecl> buffers() const override {
    return {{"running_mean", {spec_.channels}, {ParamInit::Kind::constant, 0.0f}},
            {"running_var", {spec_.channels}, {ParamInit::Kind::constant, 1.0f}}};
  }
  void bind(std::span<const Tensor> p, std::span<const Tensor> g,
            std::span<const Tensor> b) override {
    scale_ = p[0], shift_ = p[1], dscale_ = g[0], dshift_ = g[1];
    running_mean_ = b[0], running_var_ = b[1];
  }

  bool absorb_relu() override {
    DTRAIN_CHECK(plans_.empty()) << "batchnorm2d: ReLU fused after prepare()";
    spec_.relu = true;
    return true;
  }
  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  void set_layouts(std::span<const ChannelBlock> in, ChannelBlock) override { spec_.block = in[0]; }
  void set_dtype(DType dtype) override { spec_.dtype = dtype; }
  bool backward_reads_output() const override { return spec_.relu; }

  void prepare(Backend& backend, int64_t batch) override {
    if (!mean_.defined()) {
      mean_ = backend.empty({spec_.channels});
      var_ = backend.empty({spec_.channels});
      frozen_dscale_ = backend.empty({spec_.channels});
      frozen_dshift_ = backend.empty({spec_.channels});
    }
    BatchNormSpec spec = spec_;
    spec.batch = batch;
    Plan plan{backend.make_batchnorm(spec), {}, {}};
    // The workspace lives from the forward to the backward: one, sized by the build batch.
    const auto bytes = static_cast<int64_t>(plan.op->workspace_bytes());
    if (bytes > 0) {
      if (workspace_.numel() < bytes) workspace_ = backend.empty({bytes}, DType::u8);
      plan.workspace = workspace_.slice(0, {bytes});
    }
    plans_.add(batch, std::move(plan));
  }

  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    const int64_t batch = y.shape()[0];
    Plan& p = plans_.at(batch);
    if (!ctx.training) {
      p.op->forward_inference(x[0], scale_, shift_, running_mean_, running_var_, y);
      return;
    }
    p.op->forward_training(x[0], scale_, shift_, y, mean_, var_, p.workspace);
    if (ctx.recompute) return;  // the step's statistics are in already
    const auto m = static_cast<float>(config_.momentum);
    const int64_t n = batch * spec_.height * spec_.width;
    const float unbias = n > 1 ? static_cast<float>(n) / static_cast<float>(n - 1) : 1.0f;
    ctx.backend->axpby(m, mean_, 1.0f - m, running_mean_);
    ctx.backend->axpby(m * unbias, var_, 1.0f - m, running_var_);
  }

  void backward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool weights) override {
    Plan& p = plans_.at(y.shape()[0]);
    // The op always writes all three gradients; unwanted ones go to scratch.
    const Tensor* target = &dx[0];
    if (!target->defined()) {
      if (!p.dx_scratch.defined()) p.dx_scratch = ctx.backend->empty(y.shape());  // once
      target = &p.dx_scratch;
    }
    p.op->backward(x[0], y, dy, scale_, mean_, var_, p.workspace, *target,
                   weights ? dscale_ : frozen_dscale_, weights ? dshift_ : frozen_dshift_);
  }
  int64_t flops() const override { return 2 * shape_.numel() / shape_[0]; }

 private:
  struct Plan {
    std::unique_ptr<BatchNormOp> op;
    Tensor workspace;   // the fused ReLU's mask
    Tensor dx_scratch;  // only when the input needs no gradient but the weights do
  };
  Tensor workspace_;
  BatchNormOptions config_;
  BatchNormSpec spec_;
  Shape shape_;
  Tensor scale_, shift_, dscale_, dshift_, running_mean_, running_var_;
  Tensor mean_, var_;                     // batch statistics of the last training forward
  Tensor frozen_dscale_, frozen_dshift_;  // gradient sink while frozen
  PerBatch<Plan> plans_;
};

}  // namespace

LayerEntry batchnorm2d_layer() {
  return layer_row("batchnorm2d",
                   "batch normalisation per channel over batch, height and width (running "
                   "statistics in evaluation)",
                   batchnorm_schema(),
                   [](const BatchNormOptions& o) { return std::make_unique<BatchNorm2d>(o); });
}

}  // namespace dtrain
