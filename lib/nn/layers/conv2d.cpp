// Conv2d (groups = 1) on NCHW activations with [out, in, kh, kw] weights; may absorb the ReLU
// that follows it (the op then applies it, see ops.h).
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct Conv2dOptions : InitOptions {
  int64_t out_channels = 0;            // required
  std::optional<int64_t> in_channels;  // none: inferred from the input
  config::Pair kernel;                 // required
  config::Pair stride = config::Pair::square(1);
  config::Pair padding = config::Pair::square(0);
  bool bias = true;
};

config::Schema<Conv2dOptions> conv2d_schema() {
  using config::Bounds;
  config::Schema<Conv2dOptions> s("conv2d");
  s.key("out_channels", &Conv2dOptions::out_channels, config::integer64(Bounds::above(0)),
        "output channels")
      .required("the number of output channels")
      .key("in_channels", &Conv2dOptions::in_channels,
           config::optional_of(config::integer64(Bounds::above(0))),
           "input channels (checked against the graph when given)")
      .key("kernel", &Conv2dOptions::kernel, config::pair(Bounds::above(0)), "kernel size")
      .required("the kernel size, e.g. 3 or [3, 5]")
      .key("stride", &Conv2dOptions::stride, config::pair(Bounds::above(0)), "stride")
      .key("padding", &Conv2dOptions::padding, config::pair(Bounds::at_least(0)),
           "zero padding on each side")
      .key("bias", &Conv2dOptions::bias, config::boolean(), "learn a bias");
  return with_init_keys(s);
}

class Conv2d final : public Layer {
 public:
  explicit Conv2d(const Conv2dOptions& c) : config_(c) {}
  std::string_view type() const override { return "conv2d"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() == 4)
        << "layer '" << self << "' expects a [batch, channels, height, width] input but '"
        << in[0].name << "' gives " << s.str();
    DTRAIN_INPUT_CHECK(!config_.in_channels || *config_.in_channels == s[1])
        << "layer '" << self << "' expects " << *config_.in_channels << " input channels but '"
        << in[0].name << "' gives " << s.str();
    const Conv2dOptions& c = config_;
    spec_ = {s[0],       s[1],       s[2],       s[3],        c.out_channels, c.kernel.h,
             c.kernel.w, c.stride.h, c.stride.w, c.padding.h, c.padding.w,    c.bias};
    DTRAIN_INPUT_CHECK(s[2] + 2 * c.padding.h >= c.kernel.h && s[3] + 2 * c.padding.w >= c.kernel.w)
        << "layer '" << self << "': kernel " << c.kernel.h << "x" << c.kernel.w
        << " is larger than its padded input " << s.str() << " from '" << in[0].name << "'";
    return spec_.output_shape();
  }

  std::vector<ParamDecl> params() const override {
    const int64_t field = config_.kernel.h * config_.kernel.w;
    const int64_t fan_in = spec_.in_channels * field, fan_out = spec_.out_channels * field;
    std::vector<ParamDecl> p{
        {"weight", spec_.weight_shape(), weight_init(config_, fan_in, fan_out)}};
    if (config_.bias) p.push_back({"bias", {spec_.out_channels}, bias_init(config_, fan_in)});
    return p;
  }
  void bind(std::span<const Tensor> p, std::span<const Tensor> g,
            std::span<const Tensor>) override {
    w_ = p[0], dw_ = g[0];
    if (config_.bias) b_ = p[1], db_ = g[1];
  }

  bool absorb_relu() override {
    DTRAIN_CHECK(ops_.empty()) << "conv2d: ReLU fused after prepare()";
    spec_.relu = true;
    return true;
  }

  LayoutRule layout_rule() const override { return LayoutRule::chooses; }
  ChannelBlock preferred_output_block(const Backend& backend) const override {
    return backend.conv_output_block(spec_);
  }
  void set_dtype(DType dtype) override { spec_.dtype = dtype; }
  void set_layouts(std::span<const ChannelBlock> in, ChannelBlock out) override {
    spec_.src_block = in[0];
    spec_.dst_block = out;
  }
  void set_output_gradient_writable(bool writable) override { spec_.dy_writable = writable; }
  // The weight gradient reads the input; a fused ReLU's mask is the output.
  bool backward_reads_output() const override { return spec_.relu; }

  void prepare(Backend& backend, int64_t batch) override {
    ConvSpec spec = spec_;
    spec.batch = batch;
    ops_.add(batch, backend.make_conv(spec));
  }
  void forward(const RunContext&, std::span<const Tensor> x, const Tensor& y) override {
    ops_.at(y.shape()[0])->forward(x[0], w_, b_, y);
  }
  void backward(const RunContext&, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool weights) override {
    ConvOp& op = *ops_.at(y.shape()[0]);
    if (weights) op.backward_weights(x[0], y, dy, dw_, db_);
    if (dx[0].defined()) op.backward_data(y, dy, w_, dx[0]);
  }
  int64_t flops() const override {
    const int64_t outputs = spec_.out_channels * spec_.out_height() * spec_.out_width();
    return outputs *
           (2 * spec_.in_channels * spec_.kernel_h * spec_.kernel_w + (config_.bias ? 1 : 0));
  }

 private:
  Conv2dOptions config_;
  ConvSpec spec_;
  Tensor w_, b_, dw_, db_;
  PerBatch<std::unique_ptr<ConvOp>> ops_;
};

}  // namespace

LayerEntry conv2d_layer() {
  return layer_row(
      "conv2d", "2-D convolution (groups 1) of [batch, channels, height, width] with zero padding",
      conv2d_schema(), [](const Conv2dOptions& o) { return std::make_unique<Conv2d>(o); });
}

}  // namespace dtrain
