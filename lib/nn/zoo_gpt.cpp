// The GPT language models: GPT-2's architecture (Radford et al. 2019) as nanoGPT writes it, with
// nanoGPT's layer names, so that model.safetensors loads into nanoGPT's GPT (its state_dict
// names: transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...). Token and position
// embeddings, then n_layer pre-LayerNorm blocks
//   x + c_proj(attention(c_attn(ln_1(x))))  then  x + mlp.c_proj(gelu(c_fc(ln_2(x))))
// then ln_f and the output head lm_head, which by default computes with the token embedding's
// table (tied weights, one tensor in the weights file). The attention layer has no parameters:
// its projections are the linear layers c_attn and c_proj around it (layers/attention.cpp).
// GELU is the exact (erf) form: nanoGPT's nn.GELU(), the peer of our benchmarks (GPT-2 itself
// used the tanh approximation). Dropout layers are written only when dropout > 0.
// GPT-2's initialisation, as nanoGPT's _init_weights: linear weights and embeddings N(0, 0.02²),
// biases 0, LayerNorm 1 and 0, and the projections into the residual stream (attn.c_proj,
// mlp.c_proj) N(0, (0.02/√(2·n_layer))²). block_size is the dataset's sequence length and the
// vocabulary its class count.
#include <fmt/format.h>  // layer names

#include <cmath>  // sqrt

#include "core/error.h"  // DTRAIN_INPUT_CHECK
#include "nn/zoo_builder.h"
#include "nn/zoo_table.h"

namespace dtrain {
namespace {

using config::Bounds;

constexpr double kInitStd = 0.02;  // GPT-2's

struct GptOptions {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  double dropout = 0.0;
  bool bias = true;  // in the linear layers and the LayerNorms
  bool tie_weights = true;
  // The position table's rows; 0: the dataset's block_size. A longer table serves every
  // shorter context (GPT-2's 1024 rows, fine-tuned at any block_size up to 1024).
  int64_t block_size = 0;
};

YAML::Node gpt(const GptOptions& o, const ModelInput& input) {
  DTRAIN_INPUT_CHECK(o.n_embd % o.n_head == 0)
      << "model.n_embd: " << o.n_embd << " is not a multiple of model.n_head (" << o.n_head
      << "): each head gets n_embd / n_head channels";
  const int64_t context = input.sample_shape[0], c = o.n_embd;
  const int64_t block_size = o.block_size > 0 ? o.block_size : context;
  DTRAIN_INPUT_CHECK(context <= block_size)
      << "dataset.block_size: " << context << " tokens of context is above the model's position "
      << "table of " << block_size << " (model.block_size)";
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(o.n_layer));
  LayerList l;
  auto linear = [&](const std::string& name, int64_t out, bool bias, double std,
                    const std::vector<std::string>& inputs = {}) {
    YAML::Node e = l.add(name, "linear", inputs);
    e["out_features"] = out;
    e["bias"] = bias;
    e["weight_init"] = "normal";
    e["init_std"] = std;
    e["bias_init"] = "zero";
    return e;
  };
  auto layer_norm = [&](const std::string& name, const std::vector<std::string>& inputs = {}) {
    l.add(name, "layer_norm", inputs)["bias"] = o.bias;
  };
  auto dropout = [&](const std::string& name) {
    if (o.dropout > 0) l.add(name, "dropout")["p"] = o.dropout;
  };

  YAML::Node wte = l.add("transformer.wte", "embedding");
  wte["num_embeddings"] = input.classes;
  wte["embedding_dim"] = c;
  wte["init_std"] = kInitStd;
  YAML::Node wpe = l.add("transformer.wpe", "position_embedding");
  wpe["block_size"] = block_size;
  wpe["init_std"] = kInitStd;
  dropout("transformer.drop");
  for (int64_t i = 0; i < o.n_layer; ++i) {
    const std::string h = fmt::format("transformer.h.{}.", i);
    const std::string x = l.last();  // the residual stream
    l.block(fmt::format("transformer.h.{}", i));
    layer_norm(h + "ln_1", {x});
    linear(h + "attn.c_attn", 3 * c, o.bias, kInitStd);
    YAML::Node attention = l.add(h + "attn.attention", "attention");
    attention["n_head"] = o.n_head;
    attention["dropout"] = o.dropout;
    linear(h + "attn.c_proj", c, o.bias, residual_std);
    dropout(h + "attn.resid_dropout");
    l.add(h + "add_1", "add", {l.last(), x});
    const std::string x1 = l.last();
    layer_norm(h + "ln_2");
    linear(h + "mlp.c_fc", 4 * c, o.bias, kInitStd);
    l.add(h + "mlp.gelu", "gelu");
    linear(h + "mlp.c_proj", c, o.bias, residual_std);
    dropout(h + "mlp.dropout");
    l.add(h + "add_2", "add", {l.last(), x1});
  }
  l.block("");
  layer_norm("transformer.ln_f");
  YAML::Node head = linear("lm_head", input.classes, false, kInitStd);
  if (o.tie_weights) head["tie_weight"] = "transformer.wte";
  // A planner cuts between blocks only: the embeddings go with the first block, ln_f and the
  // head with the last (a stage of an embedding alone or of the head alone is all bubble).
  YAML::Node model = l.model();
  model["stage_boundaries"] = YAML::Node(YAML::NodeType::Sequence);
  for (int64_t i = 1; i < o.n_layer; ++i)
    model["stage_boundaries"].push_back(fmt::format("transformer.h.{}.ln_1", i));
  return model;
}

config::Schema<GptOptions> gpt_schema() {
  config::Schema<GptOptions> s("gpt");
  s.key("n_layer", &GptOptions::n_layer, config::integer64(Bounds::above(0)), "transformer blocks")
      .key("n_head", &GptOptions::n_head, config::integer64(Bounds::above(0)),
           "attention heads per block")
      .key("n_embd", &GptOptions::n_embd, config::integer64(Bounds::above(0)),
           "width of the residual stream (a multiple of n_head)")
      .key("dropout", &GptOptions::dropout, config::real(Bounds::closed_open(0, 1)),
           "dropout after the embeddings, on attention weights and on each block's two branches")
      .key("bias", &GptOptions::bias, config::boolean(),
           "biases in the linear layers and LayerNorms (the output head has none)")
      .key("tie_weights", &GptOptions::tie_weights, config::boolean(),
           "the output head computes with the token embedding's table (false: a weight of its "
           "own); a pipeline cut between them keeps a copy on each side, their gradients summed "
           "every step")
      .key("block_size", &GptOptions::block_size, config::integer64(Bounds::at_least(0)),
           "rows of the position table (0: the dataset's block_size, which must not be above "
           "it)");
  return s;
}

// GPT-2's four sizes (Radford et al. 2019, Table 2, as released): at its vocabulary (50257) and
// block size (1024), small has 124,439,808 parameters, medium 354,823,168, large 774,030,080 and
// xl 1,557,611,200 (V·C + 1024·C + L·(12·C² + 13·C) + 2·C, tied head).
struct Gpt2Size {
  int64_t n_layer, n_head, n_embd;
  bool operator==(const Gpt2Size&) const = default;
};

struct Gpt2Options {
  Gpt2Size size{12, 12, 768};
  double dropout = 0.0;
};

YAML::Node gpt2(const Gpt2Options& o, const ModelInput& input) {
  GptOptions shape;
  shape.n_layer = o.size.n_layer;
  shape.n_head = o.size.n_head;
  shape.n_embd = o.size.n_embd;
  shape.dropout = o.dropout;
  shape.block_size = 1024;
  return gpt(shape, input);
}

}  // namespace

ZooEntry gpt_model() {
  ZooEntry row = zoo_row("gpt",
                         "GPT-2-style causal language model (nanoGPT's layout and names): token "
                         "and position embeddings, n_layer pre-LayerNorm transformer blocks, a "
                         "tied output head; block size and vocabulary from the dataset",
                         gpt_schema(), gpt, false);
  row.sequence_input = true;
  row.blocks = true;
  return row;
}

ZooEntry gpt2_model() {
  config::Schema<Gpt2Options> s("gpt2");
  s.key("size", &Gpt2Options::size,
        config::enum_choice<Gpt2Size>({{"small", {12, 12, 768}},
                                       {"medium", {24, 16, 1024}},
                                       {"large", {36, 20, 1280}},
                                       {"xl", {48, 25, 1600}}}),
        "small: 12 layers, 12 heads, width 768 (124M); medium: 24, 16, 1024 (355M); large: 36, "
        "20, 1280 (774M); xl: 48, 25, 1600 (1558M)")
      .key("dropout", &Gpt2Options::dropout, config::real(Bounds::closed_open(0, 1)),
           "dropout after the embeddings, on attention weights and on each block's two branches");
  ZooEntry row = zoo_row("gpt2",
                         "GPT-2 (Radford et al. 2019) at one of its four sizes, small, medium, "
                         "large or xl (124M, 355M, 774M, 1558M parameters at its vocabulary of "
                         "50257): gpt with block size 1024, the vocabulary from the dataset",
                         std::move(s), gpt2, false);
  row.sequence_input = true;
  row.blocks = true;
  return row;
}

}  // namespace dtrain
