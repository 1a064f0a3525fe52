// MaxPool2d / AvgPool2d, and GlobalAvgPool (average over the whole H×W, output [N, C, 1, 1]).
// Max pooling keeps its argmax workspace for the backward pass; average pooling needs none.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct Pool2dOptions {
  config::Pair kernel;  // required
  config::Pair stride;  // absent: the kernel (the schema's fallback)
  config::Pair padding = config::Pair::square(0);
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling, PyTorch's default
};

config::Schema<Pool2dOptions> pool_schema(const char* type, PoolKind kind) {
  using config::Bounds;
  config::Schema<Pool2dOptions> s(type);
  s.key("kernel", &Pool2dOptions::kernel, config::pair(Bounds::above(0)), "window size")
      .required("the window size, e.g. 2 or [2, 3]")
      .key("stride", &Pool2dOptions::stride, config::pair(Bounds::above(0)), "stride")
      .fallback([](Pool2dOptions& o) { o.stride = o.kernel; }, "kernel")
      .key("padding", &Pool2dOptions::padding, config::pair(Bounds::at_least(0)),
           "padding on each side")
      .key("ceil_mode", &Pool2dOptions::ceil_mode, config::boolean(), "round the output size up");
  if (kind == PoolKind::avg)
    s.key("count_include_pad", &Pool2dOptions::count_include_pad, config::boolean(),
          "divide by the whole window, padding included");
  return s;
}

class Pool2d final : public Layer {
 public:
  // `global`: the window is the whole input (options unused).
  Pool2d(const Pool2dOptions& c, PoolKind kind, bool global)
      : config_(c), kind_(kind), global_(global) {}
  std::string_view type() const override {
    if (global_) return "global_avgpool";
    return kind_ == PoolKind::max ? "maxpool2d" : "avgpool2d";
  }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() == 4)
        << "layer '" << self << "' expects a [batch, channels, height, width] input but '"
        << in[0].name << "' gives " << s.str();
    const Pool2dOptions& c = config_;
    if (global_) {
      spec_ = {PoolKind::avg, s[0], s[1], s[2], s[3], s[2], s[3], 1, 1, 0, 0, false, true};
      return spec_.output_shape();
    }
    spec_ = {kind_,
             s[0],
             s[1],
             s[2],
             s[3],
             c.kernel.h,
             c.kernel.w,
             c.stride.h,
             c.stride.w,
             c.padding.h,
             c.padding.w,
             c.ceil_mode,
             c.count_include_pad};
    DTRAIN_INPUT_CHECK(s[2] + 2 * c.padding.h >= c.kernel.h && s[3] + 2 * c.padding.w >= c.kernel.w)
        << "layer '" << self << "': kernel " << c.kernel.h << "x" << c.kernel.w
        << " is larger than its padded input " << s.str() << " from '" << in[0].name << "'";
    DTRAIN_INPUT_CHECK(2 * c.padding.h <= c.kernel.h && 2 * c.padding.w <= c.kernel.w)
        << "layer '" << self << "': padding must be at most half the kernel";
    return spec_.output_shape();
  }

  bool commutes_with_relu() const override { return !global_ && kind_ == PoolKind::max; }
  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  void set_layouts(std::span<const ChannelBlock> in, ChannelBlock) override { spec_.block = in[0]; }
  void set_dtype(DType dtype) override { spec_.dtype = dtype; }

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
  Pool2dOptions config_;
  PoolKind kind_;
  bool global_;
  PoolSpec spec_;
  WorkspacePlans<PoolOp> plans_;
};

}  // namespace

LayerEntry maxpool2d_layer() {
  return layer_row(
      "maxpool2d", "the maximum of each window", pool_schema("maxpool2d", PoolKind::max),
      [](const Pool2dOptions& o) { return std::make_unique<Pool2d>(o, PoolKind::max, false); });
}

LayerEntry avgpool2d_layer() {
  return layer_row(
      "avgpool2d", "the average of each window", pool_schema("avgpool2d", PoolKind::avg),
      [](const Pool2dOptions& o) { return std::make_unique<Pool2d>(o, PoolKind::avg, false); });
}

LayerEntry global_avgpool_layer() {
  return layer_row("global_avgpool",
                   "the average over the whole height × width: [batch, channels, 1, 1]",
                   [] { return std::make_unique<Pool2d>(Pool2dOptions{}, PoolKind::avg, true); });
}

}  // namespace dtrain
