// Local response normalisation across channels (AlexNet, Krizhevsky et al. 2012 §3.3).
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

class Lrn final : public Layer {
 public:
  explicit Lrn(const LrnConfig& c) : config_(c) {}
  std::string_view type() const override { return "lrn"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() == 4)
        << "layer '" << self << "' expects a [batch, channels, height, width] input but '"
        << in[0].name << "' gives " << s.str();
    spec_ = {s[0], s[1], s[2], s[3], config_.size, config_.alpha, config_.beta, config_.k};
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
  LrnConfig config_;
  LrnSpec spec_;
  WorkspacePlans<LrnOp> plans_;
};

}  // namespace

std::unique_ptr<Layer> make_lrn(const LrnConfig& config) {
  return std::make_unique<Lrn>(config);
}

}  // namespace dtrain
