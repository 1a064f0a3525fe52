// Embedding: token ids [N, T] (f32 holding integers, ops.h) → rows of a learned table
// [num_embeddings, embedding_dim], y [N, T, embedding_dim] (PyTorch's nn.Embedding, whose
// N(0, 1) initialisation is the default). The table's size defaults to the dataset's vocabulary
// (its class count). The ids are not checked here: the op's contract leaves that to its callers,
// and the datasets check their token files against the vocabulary they report, which the model
// checks against the table.
//
// It may lend its table to a tied output head (a `linear` with `tie_weight`): the head's
// backward, which runs first, writes the table's gradient and this backward adds to it.
#include "nn/layers/layers.h"

namespace dtrain {
namespace {

struct EmbeddingOptions {
  std::optional<int64_t> num_embeddings;  // none: the dataset's vocabulary
  int64_t embedding_dim = 0;              // required
  double init_std = 1.0;                  // nn.Embedding: N(0, 1)
};

config::Schema<EmbeddingOptions> embedding_schema() {
  using config::Bounds;
  config::Schema<EmbeddingOptions> s("embedding");
  s.key("num_embeddings", &EmbeddingOptions::num_embeddings,
        config::optional_of(config::integer64(Bounds::above(0))),
        "rows of the table (none: the dataset's vocabulary)")
      .key("embedding_dim", &EmbeddingOptions::embedding_dim, config::integer64(Bounds::above(0)),
           "columns of the table: the width C of the output [N, T, C]")
      .required("the width of the embedding")
      .key("init_std", &EmbeddingOptions::init_std, config::real(Bounds::above(0)),
           "the table starts N(0, init_std²)");
  return s;
}

class Embedding final : public Layer {
 public:
  explicit Embedding(const EmbeddingOptions& o) : options_(o) {}
  std::string_view type() const override { return "embedding"; }

  void set_dataset_classes(int64_t classes) override { classes_ = classes; }
  Shape infer(const std::string& self, std::span<const InputInfo> in) override {
    const Shape& s = in[0].shape;
    DTRAIN_INPUT_CHECK(s.rank() == 2)
        << "layer '" << self << "' reads token ids [batch, positions] but '" << in[0].name
        << "' gives " << s.str();
    DTRAIN_INPUT_CHECK(options_.num_embeddings || classes_ > 0)
        << "layer '" << self << "': num_embeddings is not given and there is no dataset "
        << "vocabulary to take it from";
    vocab_ = options_.num_embeddings.value_or(classes_);
    DTRAIN_INPUT_CHECK(classes_ == 0 || vocab_ >= classes_)
        << "layer '" << self << "': num_embeddings " << vocab_ << " is smaller than the dataset's "
        << "vocabulary of " << classes_ << " tokens";
    positions_ = s[1];
    return {s[0], s[1], options_.embedding_dim};
  }

  bool lends_weight() const override { return true; }
  void set_weight_gradient_accumulates() override { accumulate_ = true; }
  std::vector<ParamDecl> params() const override {
    return {{"weight",
             {vocab_, options_.embedding_dim},
             {ParamInit::Kind::normal, static_cast<float>(options_.init_std)}}};
  }
  void bind(std::span<const Tensor> p, std::span<const Tensor> g,
            std::span<const Tensor>) override {
    table_ = p[0], dtable_ = g[0];
  }
  bool backward_reads_output() const override { return false; }

  void prepare(Backend& backend, int64_t batch) override {
    ops_.add(batch, backend.make_embedding({batch * positions_, vocab_, options_.embedding_dim}));
  }
  void forward(const RunContext&, std::span<const Tensor> x, const Tensor& y) override {
    ops_.at(y.shape()[0])->forward(x[0], table_, y);
  }
  void backward(const RunContext& ctx, std::span<const Tensor> x, const Tensor& y, const Tensor& dy,
                std::span<const Tensor> dx, bool weights) override {
    if (weights) ops_.at(y.shape()[0])->backward(x[0], dy, dtable_, accumulate_);
    if (dx[0].defined()) ctx.backend->fill_zero(dx[0]);  // ids are not differentiable
  }
  // A row copy: no arithmetic.
  int64_t flops() const override { return 0; }

 private:
  EmbeddingOptions options_;
  int64_t classes_ = 0, vocab_ = 0, positions_ = 0;
  bool accumulate_ = false;  // a tied head writes the gradient first
  Tensor table_, dtable_;
  PerBatch<std::unique_ptr<EmbeddingOp>> ops_;
};

}  // namespace

LayerEntry embedding_layer() {
  return layer_row("embedding",
                   "token ids [N, T] → rows of a learned table, [N, T, embedding_dim] "
                   "(PyTorch's nn.Embedding)",
                   embedding_schema(),
                   [](const EmbeddingOptions& o) { return std::make_unique<Embedding>(o); });
}

}  // namespace dtrain
