// MaxPool2d / AvgPool2d, and GlobalAvgPool (average over the whole H×W, output [N, C, 1, 1]).
// Max pooling keeps its argmax workspace for the backward pass; average pooling needs none.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

class Pool2d final : public Layer {
 public:
  Pool2d(const Pool2dConfig& c, bool global) : config_(c), global_(global) {}
  std::string_view type() const override {
    if (global_) return "global_avgpool";
    return config_.kind == PoolKind::max ? "maxpool2d" : "avgpool2d";
  }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() == 4)
        << "layer '" << self << "' expects a [batch, channels, height, width] input but '"
        << in[0].name << "' gives " << s.str();
    const Pool2dConfig& c = config_;
    if (global_) {
      spec_ = {PoolKind::avg, s[0], s[1], s[2], s[3], s[2], s[3], 1, 1, 0, 0, false, true};
      return spec_.output_shape();
    }
    spec_ = {c.kind,     s[0],       s[1],    s[2],    s[3],        c.kernel_h,         c.kernel_w,
             c.stride_h, c.stride_w, c.pad_h, c.pad_w, c.ceil_mode, c.count_include_pad};
    DTRAIN_INPUT_CHECK(s[2] + 2 * c.pad_h >= c.kernel_h && s[3] + 2 * c.pad_w >= c.kernel_w)
        << "layer '" << self << "': kernel " << c.kernel_h << "x" << c.kernel_w
        << " is larger than its padded input " << s.str() << " from '" << in[0].name << "'";
    DTRAIN_INPUT_CHECK(2 * c.pad_h <= c.kernel_h && 2 * c.pad_w <= c.kernel_w)
        << "layer '" << self << "': padding must be at most half the kernel";
    return spec_.output_shape();
  }

  bool commutes_with_relu() const override { return !global_ && config_.kind == PoolKind::max; }
  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  void set_layouts(std::span<const ChannelBlock> in, ChannelBlock) override { spec_.block = in[0]; }

  void prepare(Backend& backend, int64_t batch) override {
    PoolSpec spec = spec_;
    spec.batch = batch;
    plans_.add(backend, batch, backend.make_pool(spec));
  }
  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    plans_.forward(x[0], y, ctx.training);
  }
  void backward(const RunContext&, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (dx[0].defined()) plans_.backward(x[0], y, dy, dx[0]);
  }
  int64_t flops() const override {
    return spec_.output_shape().numel() / spec_.batch * spec_.kernel_h * spec_.kernel_w;
  }

 private:
  Pool2dConfig config_;
  bool global_;
  PoolSpec spec_;
  WorkspacePlans<PoolOp> plans_;
};

}  // namespace

std::unique_ptr<Layer> make_pool2d(const Pool2dConfig& config) {
  return std::make_unique<Pool2d>(config, false);
}
std::unique_ptr<Layer> make_global_avgpool() {
  return std::make_unique<Pool2d>(Pool2dConfig{}, true);
}

}  // namespace dtrain
