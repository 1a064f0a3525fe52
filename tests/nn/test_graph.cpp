// Graph construction errors, determinism, freezing, train/eval modes, smaller batches, views.
#include <cstring>  // memcmp

#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

std::string build_error(const std::string& layers, const Shape& input) {
  try {
    Graph g(nodes(layers), input);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string model_error(const std::string& spec, const ModelInput& input) {
  auto backend = cpu();
  try {
    build_model(*backend, YAML::Load(spec), input, 1);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

Tensor labels_for(int64_t b, int64_t classes) {
  Tensor t = Tensor::empty({b}, DType::i32);
  for (int64_t i = 0; i < b; ++i) t.data<int32_t>()[i] = static_cast<int32_t>((i * 7) % classes);
  return t;
}

const char* kSmallNet = R"({layers: [
  {name: c1, type: conv2d, out_channels: 4, kernel: 3, padding: 1},
  {name: bn1, type: batchnorm2d},
  {name: r1, type: relu},
  {name: p1, type: maxpool2d, kernel: 2},
  {name: c2, type: conv2d, out_channels: 4, kernel: 3, padding: 1},
  {name: sum, type: add, inputs: [c2, p1]},
  {name: f, type: flatten},
  {name: d, type: dropout, p: 0.5},
  {name: fc, type: linear, out_features: 5}]})";

}  // namespace

TEST_CASE("shape mismatches name both layers and both shapes") {
  const std::string lenet = R"([
    {name: c1, type: conv2d, out_channels: 6, kernel: 5},
    {name: pool1, type: maxpool2d, kernel: 2},
    {name: c2, type: conv2d, out_channels: 16, kernel: 5},
    {name: pool2, type: maxpool2d, kernel: 2},
    {name: fc1, type: linear, out_features: 120, in_features: 784}])";
  CHECK(build_error(lenet, {64, 1, 32, 32}) ==
        "layer 'fc1' expects 784 input features but 'pool2' gives [64, 16, 5, 5] (= 400)");
  CHECK(build_error("[{name: c, type: conv2d, out_channels: 2, kernel: 3, in_channels: 3}]",
                    {2, 1, 8, 8}) ==
        "layer 'c' expects 3 input channels but 'input' gives [2, 1, 8, 8]");
  CHECK(build_error(R"([{name: a, type: conv2d, out_channels: 2, kernel: 3},
                        {name: s, type: add, inputs: [a, input]}])",
                    {2, 1, 8, 8}) ==
        "layer 's' adds 'a' [2, 2, 6, 6] and 'input' [2, 1, 8, 8]: the shapes differ");
  CHECK(build_error(R"([{name: fc, type: linear, out_features: 4},
                        {name: c, type: conv2d, out_channels: 2, kernel: 3}])",
                    {2, 1, 8, 8}) ==
        "layer 'c' expects a [batch, channels, height, width] input but 'fc' gives [2, 4]");
  CHECK(build_error("[{name: p, type: maxpool2d, kernel: 5}]", {2, 1, 4, 4})
            .find("layer 'p': kernel 5x5 is larger than its padded input [2, 1, 4, 4]") == 0);
  // The loss needs [batch, classes].
  CHECK(model_error("{layers: [{name: fc, type: linear, out_features: 7}]}", {{4}, 10, 2}) ==
        "model: the last layer 'fc' gives [2, 7] but the loss needs [batch, classes] = [2, 10] "
        "or, per position, [batch, positions, classes] (the dataset has 10 classes)");
  CHECK(model_error("{name: alexnet}", {{3, 32, 32}, 10, 2}).find("layer 'pool5'") == 0);
}

TEST_CASE("graph names: unknown inputs, duplicates, cycles, unused layers") {
  auto make = [](std::vector<std::pair<std::string, std::vector<std::string>>> spec) {
    std::vector<GraphNode> n;
    for (auto& [name, inputs] : spec) {
      GraphNode node;
      node.name = name;
      node.layer = name.rfind("add", 0) == 0 ? make_add() : make_relu();
      node.inputs = inputs;
      n.push_back(std::move(node));
    }
    try {
      Graph g(std::move(n), {2, 3});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(make({{"a", {}}, {"b", {"zz"}}}) ==
        "layer 'b' reads 'zz', which is not a layer of the model");
  CHECK(make({{"a", {}}, {"a", {}}}) == "model: two layers are named 'a'");
  CHECK(make({{"a", {"b"}}, {"b", {"a"}}, {"c", {"b"}}}).find("cycle") != std::string::npos);
  CHECK(make({{"a", {}}, {"b", {"input"}}}) ==
        "model: layer 'a' is not read by any layer (only the last layer is an output)");
  CHECK(make({{"a", {}}, {"add", {"a"}}}) == "layer 'add' (add) takes 2 inputs but is given 1");
  CHECK(make({{"input", {}}}).find("reserved") != std::string::npos);
  // Forward references are fine for the Graph (the YAML checker asks for earlier names).
  CHECK(make({{"b", {"a"}}, {"a", {"input"}}, {"add", {"a", "b"}}}) == "(no error)");
}

TEST_CASE("same seed gives bit-identical weights, whatever the thread count") {
  auto one = cpu(1), two = cpu(2);
  YAML::Node spec = YAML::Load("{name: resnet20}");
  const ModelInput in{{3, 32, 32}, 10, 2};
  auto a = build_model(*one, spec, in, 42);
  auto b = build_model(*two, spec, in, 42);
  auto c = build_model(*one, spec, in, 43);
  REQUIRE(a->num_parameters() == b->num_parameters());
  CHECK(std::memcmp(a->parameters().raw(), b->parameters().raw(), a->parameters().bytes()) == 0);
  CHECK(std::memcmp(a->buffers().raw(), b->buffers().raw(), a->buffers().bytes()) == 0);
  CHECK(std::memcmp(a->parameters().raw(), c->parameters().raw(), a->parameters().bytes()) != 0);
  CHECK(a->buffers().numel() == 2 * (16 * 7 + 32 * 6 + 64 * 6));  // BN running mean and var
}

TEST_CASE("freeze_first: no gradients for the frozen prefix, ready offsets decrease") {
  auto backend = cpu();
  auto m = build_model(*backend, YAML::Load(kSmallNet), {{2, 6, 6}, 5, 4}, 1);
  const auto& ranges = m->layer_ranges();
  REQUIRE(ranges.size() == 4);  // c1, bn1, c2, fc
  CHECK(ranges[1].name == "bn1");
  CHECK(m->trainable_offset() == 0);
  m->freeze_first(2);
  CHECK(m->trainable_offset() == ranges[2].offset);
  backend->fill(m->gradients(), 123.0f);
  Tensor x = random_tensor({4, 2, 6, 6}, 1);
  m->forward(x, labels_for(4, 5));
  std::vector<int64_t> ready;
  m->backward(0.25f, [&](int64_t offset) { ready.push_back(offset); });
  const std::vector<float> g = to_vector(m->gradients());
  for (int64_t i = 0; i < m->trainable_offset(); ++i) REQUIRE(g[i] == 123.0f);
  int changed = 0;
  for (int64_t i = m->trainable_offset(); i < m->num_parameters(); ++i) changed += g[i] != 123.0f;
  CHECK(changed == m->num_parameters() - m->trainable_offset());
  REQUIRE(ready.size() == 2);
  CHECK(ready[0] == ranges[3].offset);
  CHECK(ready.back() == m->trainable_offset());
  // Unfreezing computes everything again; all frozen reports the end of the buffer.
  m->freeze_first(0);
  m->backward(0.25f);
  CHECK(m->gradients().data<float>()[0] != 123.0f);
  m->freeze_first(4);
  CHECK(m->trainable_offset() == m->num_parameters());
  ready.clear();
  m->backward(0.25f, [&](int64_t offset) { ready.push_back(offset); });
  CHECK(ready == std::vector<int64_t>{m->num_parameters()});
  CHECK_THROWS_AS(m->freeze_first(5), InputError);
}

TEST_CASE("eval mode: dropout is the identity and batch norm uses running statistics") {
  auto backend = cpu();
  const std::string bn_only = "[{name: bn, type: batchnorm2d}]";
  Graph g(nodes(bn_only), {4, 2, 3, 3});
  g.materialize(*backend, 1);
  Tensor x = random_tensor({4, 2, 3, 3}, 1, 0.0f, 2.0f);
  g.forward(x);  // training: updates the running statistics
  const float* rs = g.buffers().data<float>();
  for (int c = 0; c < 2; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 9; ++i) {
        const double v = x.data<float>()[(n * 2 + c) * 9 + i];
        sum += v, sq += v * v;
      }
    const double mean = sum / 36, var_unbiased = (sq - 36 * mean * mean) / 35;
    CHECK(rs[c] == doctest::Approx(0.1 * mean).epsilon(1e-4));
    CHECK(rs[2 + c] == doctest::Approx(0.9 + 0.1 * var_unbiased).epsilon(1e-4));
  }
  g.set_training(false);
  const Tensor& y = g.forward(x);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 9; ++i) {
      const int at = (1 * 2 + c) * 9 + i;
      const double expect = (x.data<float>()[at] - rs[c]) / std::sqrt(rs[2 + c] + 1e-5);
      CHECK(y.data<float>()[at] == doctest::Approx(expect).epsilon(1e-4));
    }

  // Dropout: a fresh mask each training step, the identity in evaluation.
  Graph d(nodes("[{name: d, type: dropout, p: 0.5}]"), {2, 100});
  d.materialize(*backend, 1);
  Tensor ones = Tensor::empty({2, 100});
  backend->fill(ones, 1.0f);
  const std::vector<float> first = to_vector(d.forward(ones));
  const std::vector<float> second = to_vector(d.forward(ones));
  CHECK(first != second);
  int zeros = 0;
  for (float v : first) {
    CHECK((v == 0.0f || v == 2.0f));
    zeros += v == 0.0f;
  }
  CHECK(zeros > 60);
  CHECK(zeros < 140);
  d.set_step(0);
  CHECK(to_vector(d.forward(ones)) == first);  // replayable
  d.set_training(false);
  CHECK(to_vector(d.forward(ones)) == to_vector(ones));
}

TEST_CASE("a smaller last batch reuses the buffers and matches the full batch") {
  auto backend = cpu();
  YAML::Node spec = YAML::Load(kSmallNet);
  auto m = build_model(*backend, spec, {{2, 6, 6}, 5, 8}, 3);
  Tensor x = random_tensor({8, 2, 6, 6}, 1);
  Tensor labels = labels_for(8, 5);
  m->set_training(false);
  m->forward(x, labels);
  const std::vector<float> full = to_vector(m->logits());
  const double full_loss = m->last_stats().loss_sum;
  for (int round = 0; round < 2; ++round) {  // the second round reuses the cached plans
    m->forward(x.narrow_batch(3), labels.narrow_batch(3));
    const std::vector<float> part = to_vector(m->logits());
    REQUIRE(part.size() == 15);
    for (int i = 0; i < 15; ++i) CHECK(part[i] == doctest::Approx(full[i]).epsilon(1e-5));
    CHECK(m->last_stats().count == 3);
  }
  m->forward(x, labels);
  CHECK(m->last_stats().loss_sum == doctest::Approx(full_loss));
  // Training on 3 samples gives the gradients of a model built for 3.
  auto small = build_model(*backend, spec, {{2, 6, 6}, 5, 3}, 3);
  m->set_training(true);
  m->graph().set_step(0);
  m->forward(x.narrow_batch(3), labels.narrow_batch(3));
  m->backward(1.0f / 3);
  small->forward(x.narrow_batch(3), labels.narrow_batch(3));
  small->backward(1.0f / 3);
  const std::vector<float> a = to_vector(m->gradients()), b = to_vector(small->gradients());
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == doctest::Approx(b[i]).epsilon(1e-4));
  CHECK_THROWS_AS(m->forward(random_tensor({9, 2, 6, 6}, 1), labels_for(9, 5)), Error);
}

TEST_CASE("flatten is a view and the device input is used in place") {
  auto backend = cpu();
  Graph g(nodes("[{name: f, type: flatten}]"), {3, 2, 2, 2});
  g.materialize(*backend, 1);
  Tensor x = random_tensor({3, 2, 2, 2}, 1);
  const Tensor& y = g.forward(x);
  CHECK(y.raw() == x.raw());
  CHECK(y.shape() == Shape{3, 8});
  Tensor x2 = random_tensor({3, 2, 2, 2}, 2);
  CHECK(g.forward(x2).raw() == x2.raw());  // rebinding a new input
}

TEST_CASE("summary table") {
  auto backend = cpu();
  auto m = build_model(*backend, YAML::Load(kSmallNet), {{2, 6, 6}, 5, 4}, 1);
  const std::string s = m->summary();
  CHECK(s.find("layer") == 0);
  CHECK(s.find("[4, 3, 3]") != std::string::npos);  // p1 output, per sample
  CHECK(s.substr(s.rfind('\n', s.size() - 2) + 1) ==
        "parameters: " + std::to_string(m->num_parameters()) + "\n");
  CHECK(m->num_parameters() == (2 * 4 * 9 + 4) + 8 + (4 * 4 * 9 + 4) + (36 * 5 + 5));
}
