// The sequence layers ([N, T, C] activations): embedding, position embedding, layer norm,
// causal attention, linear/dropout/add/gelu on rank-3 tensors, the tied output head and the
// per-position loss, each through a graph against finite differences or a plain reference.
#include "core/error.h"  // InputError
#include "helpers.h"
#include "nn/model_weights.h"  // model_weights, check_weights

using namespace dtrain;
using namespace dtrain::test;

namespace {

// As check_graph_gradients, for a graph that reads token ids: the parameters' gradients.
void check_id_graph_gradients(const std::string& yaml, const Shape& ids_shape, int64_t vocab) {
  check_graph_gradients(yaml, ids_shape, {.randomise_params = true, .token_vocab = vocab});
}

std::string what_throws(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace

TEST_CASE("linear, dropout, add and gelu on sequences [N, T, C]") {
  check_graph_gradients("[{name: fc, type: linear, out_features: 5}]", {2, 3, 4});
  check_graph_gradients("[{name: fc, type: linear, out_features: 3, bias: false}]", {3, 2, 6});
  check_graph_gradients(R"([
    {name: fc, type: linear, out_features: 4},
    {name: g, type: gelu},
    {name: d, type: dropout, p: 0.25},
    {name: s, type: add, inputs: [d, input]}])",
                        {2, 5, 4});
  Graph g(nodes("[{name: fc, type: linear, out_features: 7}]"), {2, 3, 4});
  CHECK(g.output_shape() == Shape{2, 3, 7});
  CHECK(g.forward_flops() == 3 * (2 * 4 * 7 + 7));  // per sample: T rows
  // Each position is transformed on its own: the same row twice gives the same output row.
  auto backend = cpu();
  g.materialize(*backend, 5);
  Tensor x = random_tensor({2, 3, 4}, 1);
  for (int j = 0; j < 4; ++j) x.data<float>()[4 + j] = x.data<float>()[j];
  const Tensor& y = g.forward(x);
  for (int j = 0; j < 7; ++j) CHECK(y.data<float>()[j] == y.data<float>()[7 + j]);
}

TEST_CASE("layer norm gradients, with and without bias") {
  GraphCheck ln;
  ln.randomise_params = true;
  check_graph_gradients("[{name: ln, type: layer_norm}]", {2, 3, 6}, ln);
  check_graph_gradients("[{name: ln, type: layer_norm, bias: false, eps: 1e-3}]", {4, 5}, ln);
  Graph g(nodes("[{name: ln, type: layer_norm, bias: false}]"), {2, 3, 6});
  CHECK(g.num_parameters() == 6);
}

TEST_CASE("attention gradients, and a frozen qkv projection before it") {
  GraphCheck att;
  att.input_lo = -2.0f;
  att.input_hi = 2.0f;
  check_graph_gradients("[{name: a, type: attention, n_head: 2}]", {2, 5, 24}, att);
  check_graph_gradients("[{name: a, type: attention, n_head: 3}]", {1, 4, 18}, att);
  // With dropout of attention weights: the backward replays the forward's masks.
  check_graph_gradients("[{name: a, type: attention, n_head: 2, dropout: 0.3}]", {2, 5, 24}, att);
  check_graph_gradients(R"([
    {name: c_attn, type: linear, out_features: 24},
    {name: a, type: attention, n_head: 2},
    {name: c_proj, type: linear, out_features: 8}])",
                        {2, 6, 8});
  CHECK_THROWS_AS(Graph(nodes("[{name: a, type: attention, n_head: 3}]"), {2, 5, 24}), InputError);
}

TEST_CASE("position embedding: adds rows of its table, the gradient passes through") {
  check_graph_gradients("[{name: p, type: position_embedding}]", {2, 3, 4});
  // A longer table: the rows past T get a zero gradient.
  check_graph_gradients(R"([
    {name: fc, type: linear, out_features: 4},
    {name: p, type: position_embedding, block_size: 5}])",
                        {3, 3, 2});
  auto backend = cpu();
  Graph g(nodes("[{name: p, type: position_embedding, block_size: 4}]"), {2, 3, 2});
  g.materialize(*backend, 1);
  const Tensor x = random_tensor({2, 3, 2}, 1);
  const Tensor& y = g.forward(x);
  const float* table = g.parameters().data<float>();
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 6; ++i)
      CHECK(y.data<float>()[n * 6 + i] == x.data<float>()[n * 6 + i] + table[i]);
  std::string message = what_throws([] {
    Graph(nodes("[{name: wpe, type: position_embedding, block_size: 2}]"), {2, 3, 2});
  });
  CHECK(message.find("wpe") != std::string::npos);
  CHECK(message.find("block_size 2") != std::string::npos);
}

TEST_CASE("embedding: rows of the table, the table's gradient against finite differences") {
  check_id_graph_gradients("[{name: e, type: embedding, num_embeddings: 6, embedding_dim: 3}]",
                           {2, 5}, 6);
  auto backend = cpu();
  Graph g(nodes("[{name: e, type: embedding, num_embeddings: 6, embedding_dim: 3}]"), {2, 4});
  g.materialize(*backend, 1);
  const Tensor ids = random_ids({2, 4}, 6, 3);
  const Tensor& y = g.forward(ids);
  CHECK(y.shape() == Shape{2, 4, 3});
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 3; ++c)
      CHECK(y.data<float>()[r * 3 + c] ==
            g.parameters().data<float>()[static_cast<int>(ids.data<float>()[r]) * 3 + c]);
  // Without num_embeddings the table has the dataset's vocabulary: a model built for 11 classes.
  const ModelInput lm{{4}, 11, 2};
  const YAML::Node spec = YAML::Load(R"({layers: [
    {name: e, type: embedding, embedding_dim: 3},
    {name: head, type: linear, out_features: 11}]})");
  CHECK(count_parameters(spec, lm) == 11 * 3 + 3 * 11 + 11);
  const YAML::Node small = YAML::Load(R"({layers: [
    {name: e, type: embedding, num_embeddings: 5, embedding_dim: 3},
    {name: head, type: linear, out_features: 11}]})");
  CHECK(what_throws([&] { count_parameters(small, lm); }).find("num_embeddings 5") !=
        std::string::npos);
}

TEST_CASE("tied output head: one weight, both uses' gradients, one tensor in the weights") {
  const std::string tied = R"([
    {name: wte, type: embedding, num_embeddings: 7, embedding_dim: 4},
    {name: ln, type: layer_norm},
    {name: lm_head, type: linear, out_features: 7, bias: false, tie_weight: wte}])";
  check_id_graph_gradients(tied, {2, 5}, 7);
  auto backend = cpu();
  Graph g(nodes(tied), {2, 5});
  CHECK(g.num_parameters() == 7 * 4 + 2 * 4);
  REQUIRE(g.layer_ranges().size() == 2);
  g.materialize(*backend, 3);
  // The head computes with the table: logits = ln(x)·tableᵀ.
  const Tensor ids = random_ids({2, 5}, 7, 4);
  const Tensor& y = g.forward(ids);
  CHECK(y.shape() == Shape{2, 5, 7});
  // Gradient-ready callbacks: the layer norm's range, then the table's once the embedding has
  // added its part; none for the head, which owns no range.
  fill_random(g.output_gradient(), 9);
  std::vector<int64_t> ready;
  std::vector<float> table_gradient_at_ready;
  g.backward([&](int64_t offset) {
    ready.push_back(offset);
    if (offset == 0) table_gradient_at_ready = to_vector(g.gradients().slice(0, {28}));
  });
  CHECK(ready == std::vector<int64_t>{28, 0});
  CHECK(table_gradient_at_ready == to_vector(g.gradients().slice(0, {28})));
  // The weights: one tensor for the table, known also as lm_head.weight.
  const std::vector<WeightSlot> slots = g.weight_slots();
  REQUIRE(slots.size() == 3);
  CHECK(slots[0].name == "wte.weight");
  CHECK(slots[0].aliases == std::vector<std::string>{"lm_head.weight"});
  NamedTensors file = download_weights(slots, g.parameters(), g.buffers(), *backend);
  CHECK_NOTHROW(check_weights(slots, file, "w.safetensors"));
  file.push_back({"lm_head.weight", file[0].shape, file[0].values});  // as PyTorch saves it
  CHECK_NOTHROW(check_weights(slots, file, "w.safetensors"));
  file.back().values[3] += 1.0f;
  CHECK(what_throws([&] {
          check_weights(slots, file, "w.safetensors");
        }).find("'lm_head.weight' is tied to 'wte.weight'") != std::string::npos);
}

TEST_CASE("a frozen tied embedding freezes the head's use of it") {
  auto backend = cpu();
  Graph g(nodes(R"([
    {name: wte, type: embedding, num_embeddings: 5, embedding_dim: 4},
    {name: ln, type: layer_norm},
    {name: lm_head, type: linear, out_features: 5, bias: false, tie_weight: wte}])"),
          {2, 3});
  g.materialize(*backend, 3);
  g.freeze_first(1);
  backend->fill_zero(g.gradients());
  g.forward(random_ids({2, 3}, 5, 1));
  fill_random(g.output_gradient(), 2);
  g.backward();
  for (float v : to_vector(g.gradients().slice(0, {20}))) CHECK(v == 0.0f);
}

TEST_CASE("invalid ties are input errors naming the layer and the key") {
  auto message = [](const std::string& yaml, const Shape& shape) {
    return what_throws([&] { Graph(nodes(yaml), shape); });
  };
  std::string m = message(R"([
    {name: e, type: embedding, num_embeddings: 5, embedding_dim: 4},
    {name: ln, type: layer_norm},
    {name: head, type: linear, out_features: 4, bias: false, tie_weight: ln}])",
                          {2, 3});
  CHECK(m.find("layer 'head' (tie_weight: 'ln')") != std::string::npos);
  CHECK(m.find("layer_norm") != std::string::npos);
  m = message(R"([
    {name: e, type: embedding, num_embeddings: 5, embedding_dim: 4},
    {name: head, type: linear, out_features: 6, tie_weight: e}])",
              {2, 3});
  CHECK(m.find("tie_weight: 'e'") != std::string::npos);
  CHECK(m.find("[6, 4]") != std::string::npos);
  m = message(R"([
    {name: e, type: embedding, num_embeddings: 5, embedding_dim: 4},
    {name: head, type: linear, out_features: 6, tie_weight: nothing}])",
              {2, 3});
  CHECK(m.find("no layer of the model has that name") != std::string::npos);
  // The head runs before the embedding it names (both read the input, the head's branch first).
  m = message(R"([
    {name: a, type: embedding, num_embeddings: 4, embedding_dim: 4},
    {name: head, type: linear, out_features: 4, bias: false, tie_weight: late},
    {name: late, type: embedding, num_embeddings: 4, embedding_dim: 4, inputs: [input]},
    {name: s, type: add, inputs: [head, late]}])",
              {2, 3});
  CHECK(m.find("'late' runs after it") != std::string::npos);
}

TEST_CASE("per-position loss: the mean over positions per sample, statistics per sample") {
  auto backend = cpu();
  const int64_t b = 3, t = 4, f = 5, v = 6;
  const YAML::Node spec =
      YAML::Load("{layers: [{name: fc, type: linear, out_features: 6}]}");  // [b, T, F] → [b, T, V]
  auto model = build_model(*backend, spec, {{t, f}, v, b}, 11);
  const Tensor x = random_tensor({b, t, f}, 1, -2.0f, 2.0f);
  Tensor labels = Tensor::empty({b, t}, DType::i32);
  for (int i = 0; i < b * t; ++i) labels.data<int32_t>()[i] = (i * 5) % v;
  model->forward(x, labels);
  const Tensor& z = model->logits();
  REQUIRE(z.shape() == Shape{b, t, v});
  double loss = 0, correct = 0;
  std::vector<double> per_sample(b, 0.0);
  for (int n = 0; n < b; ++n)
    for (int p = 0; p < t; ++p) {
      const float* zr = z.data<float>() + (n * t + p) * v;
      const double m = *std::max_element(zr, zr + v);
      double s = 0;
      for (int j = 0; j < v; ++j) s += std::exp(zr[j] - m);
      const int label = labels.data<int32_t>()[n * t + p];
      loss += (std::log(s) + m - zr[label]) / t;
      per_sample[n] += (std::log(s) + m - zr[label]) / t;
      correct += ((std::max_element(zr, zr + v) - zr) == label) / static_cast<double>(t);
    }
  auto sample_loss = [&](int n) { return per_sample[n]; };
  const LossStats st = model->last_stats();
  CHECK(st.count == b);
  CHECK(st.loss_sum == doctest::Approx(loss).epsilon(1e-5));
  CHECK(st.correct == doctest::Approx(correct));
  // backward(1): the gradient of the loss sum over samples (each a mean over positions).
  model->backward(1.0f);
  const std::vector<float> grads = to_vector(model->gradients());
  auto objective = [&]() {
    model->forward(x, labels);
    return model->last_stats().loss_sum;
  };
  compare_gradients("d(loss)/dparams", model->parameters(), grads, objective, 1e-3f);
  // The schedulers' grad_scale 1/b gives the batch mean.
  model->forward(x, labels);
  model->backward(1.0f / b);
  const std::vector<float> mean = to_vector(model->gradients());
  for (size_t i = 0; i < grads.size(); ++i)
    CHECK(mean[i] == doctest::Approx(grads[i] / b).epsilon(1e-5));
  // Labels must be [b, T].
  CHECK_THROWS(model->forward(x, Tensor::zeros({b}, DType::i32)));
  // A smaller last batch: its own statistics, per sample.
  model->set_training(false);
  model->forward(x.narrow_batch(2), labels.narrow_batch(2));
  const LossStats last = model->last_stats();
  CHECK(last.count == 2);
  model->forward(x.narrow_batch(1), labels.narrow_batch(1));
  const double first = model->last_stats().loss_sum;
  model->forward(x, labels);
  CHECK(last.loss_sum ==
        doctest::Approx(model->last_stats().loss_sum - sample_loss(2)).epsilon(1e-5));
  CHECK(first == doctest::Approx(sample_loss(0)).epsilon(1e-5));
}
