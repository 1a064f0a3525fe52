// Causal multi-head self-attention, parameter-free: it reads the fused projections
// qkv [N, T, 3C] that a `linear` layer makes (nanoGPT's attn.c_attn) and writes the heads'
// outputs [N, T, C], which a `linear` layer projects (attn.c_proj). The projections are kept
// out of this layer on purpose: their GEMMs stay in the tuned linear op on both backends, the
// layer names match nanoGPT's state_dict (transformer.h.0.attn.c_attn.weight, ...), and
// PipeDream's profile sees them as layers of their own. `dropout` drops attention weights in
// training (nanoGPT's attn_dropout); the masks come from the counter RNG with this layer's
// stream, so they are the same on every backend (ops.h AttentionSpec).
#include "core/rng.h"  // stream_id
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct AttentionOptions {
  int64_t n_head = 0;  // required
  double dropout = 0.0;
};

config::Schema<AttentionOptions> attention_schema() {
  using config::Bounds;
  config::Schema<AttentionOptions> s("attention");
  s.key("n_head", &AttentionOptions::n_head, config::integer64(Bounds::above(0)),
        "heads; each gets C / n_head channels")
      .required("the number of heads")
      .key("dropout", &AttentionOptions::dropout, config::real(Bounds::closed_open(0, 1)),
           "probability of dropping an attention weight in training");
  return s;
}

class Attention final : public Layer {
 public:
  explicit Attention(const AttentionOptions& o) : options_(o) {}
  std::string_view type() const override { return "attention"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() == 3 && s[2] % (3 * options_.n_head) == 0)
        << "layer '" << self << "' reads queries, keys and values [batch, positions, 3·C] with C "
        << "a multiple of n_head " << options_.n_head << " (a linear layer of 3·C outputs) but '"
        << in[0].name << "' gives " << s.str();
    batch_ = s[0];
    seq_ = s[1];
    channels_ = s[2] / 3;
    return {s[0], seq_, channels_};
  }

  void set_dtype(DType dtype) override { dtype_ = dtype; }
  // The rows' log-sum-exps [N, heads, T] f32, in the graph's arena (set at infer: the build
  // batch is the input's).
  int64_t saved_bytes() const override { return 4 * batch_ * options_.n_head * seq_; }
  void bind_saved(const Tensor& bytes) override {
    lse_ = bytes.view_bytes(0, {batch_, options_.n_head, seq_}, DType::f32);
  }
  void prepare(Backend& backend, int64_t batch) override {
    const AttentionSpec spec{batch,
                             seq_,
                             options_.n_head,
                             channels_ / options_.n_head,
                             static_cast<float>(options_.dropout),
                             dtype_};
    auto op = backend.make_attention(spec);
    if (!lse_.defined()) lse_ = backend.empty({batch, options_.n_head, seq_});  // build batch
    const auto bytes = static_cast<int64_t>(op->workspace_bytes());
    if (bytes > workspace_.numel()) workspace_ = backend.empty({bytes}, DType::u8);
    plans_.add(batch, {std::move(op), lse_.narrow_batch(batch), Tensor()});
  }
  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    Plan& p = plans_.at(y.shape()[0]);
    training_ = ctx.training;
    // One stream per (node, step), as dropout's: the backward replays the forward's.
    stream_ = stream_id(RngStream::dropout,
                        (static_cast<uint64_t>(ctx.node) << 32) + (ctx.step & 0xffffffffULL));
    seed_ = ctx.seed;
    p.op->forward(x[0], y, p.lse, workspace_, ctx.training, seed_, stream_);
  }
  void backward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool) override {
    DTRAIN_CHECK(training_) << "attention: backward after an evaluation forward";
    Plan& p = plans_.at(y.shape()[0]);
    // The op writes dqkv: scratch when nobody reads it (the model input), made once.
    if (!dx[0].defined() && !p.dx.defined()) p.dx = ctx.backend->empty(x[0].shape());
    p.op->backward(x[0], y, dy, p.lse, workspace_, seed_, stream_, dx[0].defined() ? dx[0] : p.dx);
  }
  // Per head and query t: t + 1 scores and t + 1 weighted values of D multiply-adds each (the
  // causal half of the T×T products).
  int64_t flops() const override { return 2 * 2 * channels_ * seq_ * (seq_ + 1) / 2; }

 private:
  DType dtype_ = DType::f32;  // of the activations (set_dtype)
  struct Plan {
    std::unique_ptr<AttentionOp> op;
    Tensor lse;  // view of lse_
    Tensor dx;   // scratch input gradient, made when first needed
  };
  AttentionOptions options_;
  int64_t batch_ = 0, seq_ = 0, channels_ = 0;
  bool training_ = true;
  uint64_t seed_ = 0, stream_ = 0;  // of the last forward's dropout
  Tensor lse_, workspace_;
  PerBatch<Plan> plans_;
};

}  // namespace

LayerEntry attention_layer() {
  return layer_row("attention",
                   "causal multi-head self-attention on [N, T, 3C] queries, keys and values "
                   "from a linear layer → [N, T, C] (no parameters; the projections are linear "
                   "layers)",
                   attention_schema(),
                   [](const AttentionOptions& o) { return std::make_unique<Attention>(o); });
}

}  // namespace dtrain
