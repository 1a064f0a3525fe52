// Local response normalisation across channels (AlexNet, Krizhevsky et al. 2012 §3.3).
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct LrnOptions {
  int64_t size = 5;
  double alpha = 1e-4, beta = 0.75, k = 2;  // PyTorch LocalResponseNorm / AlexNet paper
};

config::Schema<LrnOptions> lrn_schema() {
  const auto positive = config::Bounds::above(0);
  config::Schema<LrnOptions> s("lrn");
  s.key("size", &LrnOptions::size, config::integer64(positive), "channels in the window")
      .key("alpha", &LrnOptions::alpha, config::real(positive), "scale (PyTorch's convention)")
      .key("beta", &LrnOptions::beta, config::real(positive), "exponent")
      .key("k", &LrnOptions::k, config::real(positive), "additive constant");
  return s;
}

class Lrn final : public Layer {
 public:
  explicit Lrn(const LrnOptions& c) : config_(c) {}
  std::string_view type() const override { return "lrn"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() == 4)
        << "layer '" << self << "' expects a [batch, channels, height, width] input but '"
        << in[0].name << "' gives " << s.str();
    spec_ = {s[0],
             s[1],
             s[2],
             s[3],
             config_.size,
             static_cast<float>(config_.alpha),
             static_cast<float>(config_.beta),
             static_cast<float>(config_.k)};
    return s;
  }

  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  void set_layouts(std::span<const ChannelBlock> in, ChannelBlock) override { spec_.block = in[0]; }

  void prepare(Backend& backend, int64_t batch) override {
    LrnSpec spec = spec_;
    spec.batch = batch;
    plans_.add(backend, batch, backend.make_lrn(spec));
  }
  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    plans_.forward(x[0], y, ctx.training);
  }
  void backward(const RunContext&, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (dx[0].defined()) plans_.backward(x[0], y, dy, dx[0]);
  }
  // Σx² over `size` channels (2 per term), then scale, power and divide.
  int64_t flops() const override {
    return spec_.shape().numel() / spec_.batch * (2 * config_.size + 3);
  }

 private:
  LrnOptions config_;
  LrnSpec spec_;
  WorkspacePlans<LrnOp> plans_;
};

}  // namespace

LayerEntry lrn_layer() {
  return layer_row("lrn",
                   "local response normalisation across channels (AlexNet; PyTorch's "
                   "LocalResponseNorm)",
                   lrn_schema(), [](const LrnOptions& o) { return std::make_unique<Lrn>(o); });
}

}  // namespace dtrain
