// Position embedding: y[n, t, :] = x[n, t, :] + table[t, :] for a learned table
// [block_size, C] (GPT-2's wpe: nanoGPT adds wpe(arange(T)) to the token embeddings). Its
// input is the token embedding [N, T, C]; T ≤ block_size, which defaults to T. The gradient
// passes through to the input unchanged, and the table's is the sum over the batch (rows from
// T on get 0). Runs in place where the graph allows it.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct PositionEmbeddingOptions {
  std::optional<int64_t> block_size;  // none: T of the input
  double init_std = 1.0;              // nn.Embedding: N(0, 1)
};

config::Schema<PositionEmbeddingOptions> position_embedding_schema() {
  using config::Bounds;
  config::Schema<PositionEmbeddingOptions> s("position_embedding");
  s.key("block_size", &PositionEmbeddingOptions::block_size,
        config::optional_of(config::integer64(Bounds::above(0))),
        "rows of the table: the longest sequence (none: the input's length T)")
      .key("init_std", &PositionEmbeddingOptions::init_std, config::real(Bounds::above(0)),
           "the table starts N(0, init_std²)");
  return s;
}

class PositionEmbedding final : public Layer {
 public:
  explicit PositionEmbedding(const PositionEmbeddingOptions& o) : options_(o) {}
  std::string_view type() const override { return "position_embedding"; }

  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    shape_ = in[0].shape;
    DTRAIN_INPUT_CHECK(shape_.rank() == 3)
        << "layer '" << self << "' adds positions to a sequence [batch, positions, channels] but '"
        << in[0].name << "' gives " << shape_.str();
    block_ = options_.block_size.value_or(shape_[1]);
    DTRAIN_INPUT_CHECK(shape_[1] <= block_) << "layer '" << self << "': sequences of " << shape_[1]
                                            << " positions exceed block_size " << block_;
    return shape_;
  }
  std::vector<ParamDecl> params() const override {
    return {{"weight",
             {block_, shape_[2]},
             {ParamInit::Kind::normal, static_cast<float>(options_.init_std)}}};
  }
  void bind(std::span<const Tensor> p, std::span<const Tensor> g,
            std::span<const Tensor>) override {
    const int64_t used = shape_[1] * shape_[2];
    table_ = p[0].slice(0, {used});
    dtable_ = g[0].slice(0, {used});
    if (block_ > shape_[1]) unused_gradient_ = g[0].slice(used, {(block_ - shape_[1]) * shape_[2]});
  }

  bool gradient_passes_through(int) const override { return true; }
  bool backward_reads_input(int) const override { return false; }
  bool backward_reads_output() const override { return false; }
  bool can_run_in_place() const override { return true; }

  void prepare(Backend&, int64_t) override {}
  void forward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y) override {
    if (y.raw() != x[0].raw()) ctx.backend->copy(y, x[0]);
    ctx.backend->add_to_rows(y, table_);
  }
  void backward(const RunContext& ctx, std::span<const Tensor>, const Tensor&, const Tensor& dy,
                std::span<const Tensor> dx, bool weights) override {
    if (weights) {
      ctx.backend->sum_rows(dy, dtable_);
      if (unused_gradient_.defined()) ctx.backend->fill_zero(unused_gradient_);
    }
    if (dx[0].defined()) ctx.backend->copy(dx[0], dy);
  }
  int64_t flops() const override { return shape_[1] * shape_[2]; }

 private:
  PositionEmbeddingOptions options_;
  Shape shape_;
  int64_t block_ = 0;
  Tensor table_, dtable_, unused_gradient_;  // the rows of the first T positions; the others'
};

}  // namespace

LayerEntry position_embedding_layer() {
  return layer_row("position_embedding",
                   "adds a learned table [block_size, C] to a sequence [N, T, C], row t to "
                   "position t (GPT-2's wpe)",
                   position_embedding_schema(), [](const PositionEmbeddingOptions& o) {
                     return std::make_unique<PositionEmbedding>(o);
                   });
}

}  // namespace dtrain
