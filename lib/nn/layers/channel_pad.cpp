// Option-A shortcut of the CIFAR ResNets (He et al. 2016 §4.2; the common PyTorch port pads
// x[:, :, ::s, ::s] with zero channels on both sides): a 1×1 average pool with stride s
// subsamples, then a channel copy places each sample's channels in the middle of the
// zero-filled output. Any layout: it follows its input's.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct ChannelPadOptions {
  int64_t out_channels = 0;  // required
  int64_t stride = 1;
};

config::Schema<ChannelPadOptions> channel_pad_schema() {
  const auto positive = config::Bounds::above(0);
  config::Schema<ChannelPadOptions> s("channel_pad");
  s.key("out_channels", &ChannelPadOptions::out_channels, config::integer64(positive),
        "channels after padding")
      .required("the number of output channels")
      .key("stride", &ChannelPadOptions::stride, config::integer64(positive),
           "spatial subsampling");
  return s;
}

class ChannelPad final : public Layer {
 public:
  explicit ChannelPad(const ChannelPadOptions& c) : config_(c) {}
  std::string_view type() const override { return "channel_pad"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() == 4)
        << "layer '" << self << "' expects a [batch, channels, height, width] input but '"
        << in[0].name << "' gives " << s.str();
    DTRAIN_INPUT_CHECK(config_.out_channels >= s[1])
        << "layer '" << self << "' pads to " << config_.out_channels << " channels but '"
        << in[0].name << "' gives " << s.str();
    const int64_t k = config_.stride;
    pool_ = {PoolKind::avg, s[0], s[1], s[2], s[3], 1, 1, k, k, 0, 0, false, true};
    in_channels_ = s[1];
    return {s[0], config_.out_channels, pool_.out_height(), pool_.out_width()};
  }

  LayoutRule layout_rule() const override { return LayoutRule::follows; }
  void set_layouts(std::span<const ChannelBlock> in, ChannelBlock) override { pool_.block = in[0]; }
  void set_dtype(DType dtype) override { pool_.dtype = dtype; }
  bool backward_reads_output() const override { return false; }

  void prepare(Backend& backend, int64_t batch) override {
    Plan plan;
    if (config_.stride > 1) {
      PoolSpec spec = pool_;
      spec.batch = batch;
      plan.pool = backend.make_pool(spec);
      if (!sub_.defined()) {
        sub_ = backend.empty(pool_.output_shape(), pool_.dtype);
        dsub_ = backend.empty(pool_.output_shape(), pool_.dtype);
      }
      plan.sub = sub_.narrow_batch(batch);
      plan.dsub = dsub_.narrow_batch(batch);
    }
    plans_.add(batch, std::move(plan));
  }

  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    Plan& p = plans_.at(y.shape()[0]);
    const Tensor* src = &x[0];
    if (p.pool) {
      p.pool->forward(x[0], p.sub, {}, ctx.training);
      src = &p.sub;
    }
    ctx.backend->fill_zero(y);
    ctx.backend->copy_channels(y, before(), *src, 0, in_channels_, pool_.block);
  }

  void backward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    if (!dx[0].defined()) return;
    Plan& p = plans_.at(y.shape()[0]);
    const Tensor& dsrc = p.pool ? p.dsub : dx[0];
    ctx.backend->copy_channels(dsrc, 0, dy, before(), in_channels_, pool_.block);
    if (p.pool) p.pool->backward(x[0], p.sub, p.dsub, {}, dx[0]);
  }

 private:
  // The output channel that input channel 0 lands on.
  int64_t before() const { return (config_.out_channels - in_channels_) / 2; }
  struct Plan {
    std::unique_ptr<PoolOp> pool;  // null for stride 1
    Tensor sub, dsub;              // the subsampled input and its gradient
  };
  ChannelPadOptions config_;
  PoolSpec pool_;
  int64_t in_channels_ = 0;
  Tensor sub_, dsub_;
  PerBatch<Plan> plans_;
};

}  // namespace

LayerEntry channel_pad_layer() {
  return layer_row("channel_pad",
                   "the option-A ResNet shortcut: subsample by stride, then zero-pad the channels "
                   "on both sides to out_channels",
                   channel_pad_schema(),
                   [](const ChannelPadOptions& o) { return std::make_unique<ChannelPad>(o); });
}

}  // namespace dtrain
