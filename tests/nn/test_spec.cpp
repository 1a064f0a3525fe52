// check_model_spec: every problem at once, with key paths and YAML lines; defaults filled.
#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

std::vector<std::string> problems_of(const std::string& yaml) {
  std::vector<std::string> problems;
  YAML::Node doc = YAML::Load(yaml);
  check_model_spec(doc["model"], problems);
  return problems;
}

bool has(const std::vector<std::string>& problems, const std::string& text) {
  for (const auto& p : problems)
    if (p == text) return true;
  for (const auto& p : problems) MESSAGE("problem: " << p);
  return false;
}

}  // namespace

TEST_CASE("zoo options are validated with key paths and lines") {
  auto p = problems_of(R"(seed: 1
model:
  name: mlp
  hidden: [500, 0, x]
  depth: 3
)");
  CHECK(p.size() == 3);
  CHECK(has(p, "model.hidden[1]: must be > 0, got 0 (line 4)"));
  CHECK(has(p, "model.hidden[2]: expected an integer, got 'x' (line 4)"));
  CHECK(has(p, "model.depth: unknown key (known keys: hidden, name, recompute) (line 5)"));

  CHECK(has(problems_of("model: {name: mlp, hidden: 500}"),
            "model.hidden: expected a list of integer > 0, got '500' (line 1)"));
  CHECK(has(problems_of("model: {name: resnet18, small_input: maybe}"),
            "model.small_input: expected auto | true | false, got 'maybe' (line 1)"));
  CHECK(has(problems_of("model: {name: alexnet, dropout: 1.5}"),
            "model.dropout: must be in [0, 1), got 1.5 (line 1)"));
  CHECK(has(problems_of("model: {name: resnet20, shortcut: C}"),
            "model.shortcut: expected one of A, B, got 'C'; did you mean 'A'? (line 1)"));
  CHECK(has(problems_of("model: {name: lenet, lrn: true}"),
            "model.lrn: unknown key (known keys: name, recompute) (line 1)"));
  CHECK(problems_of("model: {name: resnet99}").front().find("model.name: expected one of mlp, ") ==
        0);
  CHECK(problems_of("model: {}").front().find("model: needs `name` or `layers`") == 0);
  CHECK(problems_of("seed: 1").front().find("model: required") == 0);
  CHECK(has(
      problems_of("model: {name: mlp, layers: []}"),
      "model: give either `name` (a zoo model) or `layers` (a custom graph), not both (line 1)"));
}

TEST_CASE("zoo defaults are filled in") {
  std::vector<std::string> problems;
  YAML::Node m = check_model_spec(YAML::Load("{name: mlp}"), problems);
  CHECK(problems.empty());
  CHECK(m["hidden"].size() == 2);
  CHECK(m["hidden"][1].as<int>() == 500);
  m = check_model_spec(YAML::Load("{name: resnet18}"), problems);
  CHECK(m["small_input"].as<std::string>() == "auto");
  m = check_model_spec(YAML::Load("{name: vgg16, batch_norm: yes}"), problems);
  CHECK(m["batch_norm"].as<bool>() == true);
  CHECK(m["dropout"].as<double>() == 0.5);
  CHECK(problems.empty());
  for (const auto& name : zoo_names()) {
    check_model_spec(YAML::Load("{name: " + name + "}"), problems);
    CHECK(problems.empty());
  }
}

TEST_CASE("custom layer lists are validated entry by entry") {
  auto p = problems_of(R"(model:
  layers:
    - {name: c1, type: conv2d, out_channels: 6, kernel: 0}
    - {name: c1, type: relu}
    - {name: p, type: maxpool2d, kernel: [2], stride: -1}
    - {name: q, type: conv, out_channels: 3}
    - {name: fc, type: linear}
    - {name: s, type: add, inputs: [fc, nowhere]}
    - {name: t, type: add}
    - {name: d, type: dropout, p: 1, colour: red}
    - {type: relu}
)");
  CHECK(has(p, "model.layers[0].kernel: must be > 0, got 0 (line 3)"));
  CHECK(has(p, "model.layers[1].name: duplicate name 'c1' (line 4)"));
  CHECK(has(p,
            "model.layers[2].kernel: expected integer > 0 or a [height, width] pair, got a list "
            "(line 5)"));
  CHECK(has(p, "model.layers[2].stride: must be > 0, got -1 (line 5)"));
  CHECK(p[4].find("model.layers[3].type: expected one of linear, conv2d,") == 0);
  CHECK(has(p, "model.layers[4].out_features: required: the number of outputs (line 7)"));
  CHECK(has(p,
            "model.layers[5].inputs[1]: unknown layer 'nowhere' (inputs must name earlier "
            "layers or 'input') (line 8)"));
  CHECK(has(p, "model.layers[6].inputs: add needs `inputs: [a, b]` (line 9)"));
  CHECK(has(p, "model.layers[7].p: must be in [0, 1), got 1 (line 10)"));
  CHECK(has(
      p,
      "model.layers[7].colour: unknown key (known keys: block, inputs, name, p, type) (line 10)"));
  // The last entry gives no name: it has its default one (relu8), no problem.
  for (const auto& problem : p) CHECK(problem.find("model.layers[8]") == std::string::npos);
  CHECK(has(
      problems_of("model: {layers: [{name: a, type: relu, inputs: [b]}, {name: b, type: relu}]}"),
      "model.layers[0].inputs[0]: unknown layer 'b' (inputs must name earlier layers or "
      "'input') (line 1)"));
  CHECK(has(problems_of(
                "model: {layers: [{name: a, type: relu}, {name: b, type: relu, inputs: [input]}]}"),
            "model.layers[0].name: layer 'a' is not read by any layer (only the last layer is the "
            "output) (line 1)"));
  CHECK(has(problems_of("model: {layers: [{name: a, type: relu, inputs: [input, input]}]}"),
            "model.layers[0].inputs: relu takes 1 input, got 2 (line 1)"));
  // An entry that is not a map, or has no type: only that is reported, not its neighbours' keys.
  auto lone = problems_of("model: {layers: [5, {name: a, type: relu}]}");
  CHECK(lone == std::vector<std::string>{"model.layers[0]: expected a map, got '5' (line 1)"});
  lone = problems_of("model: {layers: [{name: a, out_features: 3}]}");
  REQUIRE(lone.size() == 1);
  CHECK(lone[0].starts_with("model.layers[0].type: required: one of linear, "));
  CHECK(has(problems_of("model: {layers: []}"),
            "model.layers: must be a non-empty list of layers (line 1)"));
  CHECK(has(problems_of("model: {layers: [{name: a, type: relu}], extra: 1}"),
            "model.extra: unknown key (known keys: layers, recompute) (line 1)"));
}

TEST_CASE("a layer without a name is named by its type and its position, from 0") {
  std::vector<std::string> problems;
  const YAML::Node m = check_model_spec(YAML::Load(R"({layers: [
      {type: flatten},
      {type: linear, out_features: 8},
      {name: act, type: relu},
      {type: add, inputs: [linear1, act]},
      {type: linear, out_features: 3}]})"),
                                        problems);
  CHECK(problems.empty());
  std::vector<std::string> names;
  for (const YAML::Node& e : m["layers"]) {
    names.push_back(e["name"].as<std::string>());
    CHECK(e.begin()->first.as<std::string>() == "name");  // first, as a user writes it
  }
  CHECK(names == std::vector<std::string>{"flatten0", "linear1", "act", "add3", "linear4"});
  // The resolved list reads back as itself: config.yaml names what the weights file names.
  const YAML::Node again = check_model_spec(m, problems);
  CHECK(problems.empty());
  CHECK(YAML::Dump(again) == YAML::Dump(m));
}

TEST_CASE("a default name that another layer has is an error naming both entries") {
  // A later default name taken by an earlier layer's name.
  CHECK(has(problems_of("model: {layers: [{name: relu1, type: linear, out_features: 4}, "
                        "{type: relu}, {type: linear, out_features: 2}]}"),
            "model.layers[1]: its default name 'relu1' (its type and position) is taken by "
            "model.layers[0]; give one of the two another name (line 1)"));
  // A later name that is an earlier layer's default name.
  CHECK(has(problems_of("model: {layers: [{type: linear, out_features: 4}, "
                        "{name: linear0, type: relu}, {type: linear, out_features: 2}]}"),
            "model.layers[1].name: 'linear0' is model.layers[0]'s default name (its type and "
            "position); give one of the two another name (line 1)"));
  // Names given twice stay as they were reported.
  CHECK(has(problems_of("model: {layers: [{name: a, type: relu}, {name: a, type: relu}]}"),
            "model.layers[1].name: duplicate name 'a' (line 1)"));
  // A layer nobody reads is named by its default name, at its entry.
  CHECK(has(problems_of("model: {layers: [{type: relu}, {type: relu, inputs: [input]}]}"),
            "model.layers[0]: layer 'relu0' is not read by any layer (only the last layer is the "
            "output) (line 1)"));
  // Inputs name earlier layers, by their default names as by given ones.
  CHECK(has(problems_of("model: {layers: [{type: relu, inputs: [relu1]}, {type: relu}]}"),
            "model.layers[0].inputs[0]: unknown layer 'relu1' (inputs must name earlier layers "
            "or 'input') (line 1)"));
}

TEST_CASE("a model from a list without names builds, trains and names its weights") {
  auto backend = cpu();
  const YAML::Node spec = YAML::Load(
      "{layers: [{type: flatten}, {type: linear, out_features: 6}, {type: relu}, "
      "{type: linear, out_features: 3}]}");
  auto model = build_model(*backend, spec, {{1, 2, 2}, 3, 2}, 5);
  CHECK(model->num_parameters() == 4 * 6 + 6 + 6 * 3 + 3);
  std::vector<std::string> weights;
  for (const WeightSlot& w : model->weight_slots()) weights.push_back(w.name);
  CHECK(weights == std::vector<std::string>{"linear1.weight", "linear1.bias", "linear3.weight",
                                            "linear3.bias"});
  const Tensor x = random_tensor({2, 1, 2, 2}, 1);
  Tensor labels = Tensor::empty({2}, DType::i32);
  labels.data<int32_t>()[0] = 0;
  labels.data<int32_t>()[1] = 2;
  model->set_training(true);
  model->forward(x, labels);
  model->backward(0.5f);
  CHECK(std::isfinite(model->last_stats().loss_sum));
  // A tied head names its lender by the lender's default name.
  const YAML::Node tied = YAML::Load(
      "{layers: [{type: embedding, num_embeddings: 5, embedding_dim: 4}, {type: layer_norm}, "
      "{type: linear, out_features: 5, bias: false, tie_weight: embedding0}]}");
  const std::vector<WeightSlot> slots = model_weight_slots(tied, {{3}, 5, 2});
  REQUIRE(!slots.empty());
  CHECK(slots[0].name == "embedding0.weight");
  CHECK(slots[0].aliases == std::vector<std::string>{"linear2.weight"});
}

TEST_CASE("custom layer defaults are filled in") {
  std::vector<std::string> problems;
  YAML::Node m = check_model_spec(YAML::Load(R"({layers: [
      {name: c, type: conv2d, out_channels: 2, kernel: [3, 5]},
      {name: p, type: maxpool2d, kernel: 3},
      {name: fc, type: linear, out_features: 2, weight_init: normal}]})"),
                                  problems);
  CHECK(problems.empty());
  const YAML::Node c = m["layers"][0], p = m["layers"][1], fc = m["layers"][2];
  CHECK(c["stride"].as<int>() == 1);
  CHECK(c["padding"].as<int>() == 0);
  CHECK(c["bias"].as<bool>() == true);
  CHECK(c["kernel"][1].as<int>() == 5);
  CHECK(p["stride"].as<int>() == 3);
  CHECK(p["ceil_mode"].as<bool>() == false);
  CHECK(fc["init_std"].as<double>() == 0.01);
  CHECK(fc["bias_init"].as<std::string>() == "pytorch");
}

TEST_CASE("build_model rejects an unchecked spec with all its problems") {
  auto backend = cpu();
  try {
    build_model(*backend, YAML::Load("{name: mlp, hidden: [0, -1]}"), {{1, 28, 28}, 10, 2}, 1);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "model.hidden[0]: must be > 0, got 0 (line 1)\nmodel.hidden[1]: must be > 0, got -1 "
          "(line 1)");
  }
}

TEST_CASE("a zoo model expands to a layer list a user could write") {
  YAML::Node layers = expand_model_spec(YAML::Load("{name: resnet20}"), {{3, 32, 32}, 10, 1});
  std::vector<std::string> problems;
  YAML::Node again = check_model_spec(layers, problems);
  CHECK(problems.empty());
  CHECK(count_parameters(again, {{3, 32, 32}, 10, 1}) == 269722);
  CHECK(layers["layers"][0]["name"].as<std::string>() == "conv1");
}
