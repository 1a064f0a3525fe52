// The layer table drives the reading of a `layers:` entry: for every row (a new one is covered
// without a change here), an unknown key, a value of the wrong type, one out of range and a
// wrong number of inputs are each reported at model.layers[i]..., as an InputError (exit 2).
#include <fmt/format.h>  // shortest number text

#include <optional>

#include "helpers.h"
#include "nn/layer_table.h"
#include "nn/zoo_table.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// The problems of a `layers:` list whose entry 1 is a `type` layer with `extra` keys (entry 0,
// a relu, feeds it), and whether they are thrown as an InputError.
std::vector<std::string> problems_of(const LayerEntry& layer, const std::string& extra,
                                     size_t inputs) {
  std::string list = "[first";
  for (size_t k = 1; k < inputs; ++k) list += ", input";
  list += "]";
  const std::string yaml = "{layers: [{name: first, type: relu}, {name: x, type: " + layer.type +
                           ", inputs: " + list + (extra.empty() ? "" : ", " + extra) + "}]}";
  std::vector<std::string> problems;
  check_model_spec(YAML::Load(yaml), problems);
  CHECK_THROWS_AS(throw_if_problems(problems), InputError);
  return problems;
}

// Whether a problem starts with one of `prefixes`.
bool reported(const std::vector<std::string>& problems, std::vector<std::string> prefixes) {
  for (const auto& p : problems)
    for (const auto& prefix : prefixes)
      if (p.starts_with(prefix)) return true;
  for (const auto& p : problems) MESSAGE("problem: " << p);
  return false;
}

// A value outside what a key of `type` (its reference's "integer > 0", "number in [0, 1)",
// "none | tanh", ...) accepts; nullopt for a kind with no range (true | false). A kind this
// does not know fails the test: teach it here.
std::optional<std::string> out_of_range(const std::string& type) {
  if (type == "true | false" || type == "non-empty text") return std::nullopt;
  const std::string number = type.substr(0, type.find(" or ["));  // kernel: "integer > 0 or [..."
  for (const char* noun : {"integer ", "number "}) {
    if (!number.starts_with(noun)) continue;
    const std::string bound = number.substr(std::string(noun).size());
    if (bound.starts_with(">= ")) return fmt::format("{}", std::stod(bound.substr(3)) - 1);
    if (bound.starts_with("> ")) return bound.substr(2);
    if (bound.starts_with("in [") || bound.starts_with("in (")) {
      const size_t comma = bound.find(", ");
      const std::string lo = bound.substr(4, comma - 4);
      const std::string hi = bound.substr(comma + 2, bound.size() - comma - 3);
      if (bound.back() == ')') return hi;
      if (bound[3] == '(') return lo;
      return fmt::format("{}", std::stod(hi) + 1);
    }
  }
  if (type.find(" | ") != std::string::npos) return std::string("no_such_value");
  FAIL("no out-of-range value known for a key of type '" << type << "': teach out_of_range()");
  return std::nullopt;
}

}  // namespace

TEST_CASE("every layer type: unknown keys, wrong types and out-of-range values name the key") {
  REQUIRE(!layer_types().empty());
  for (const LayerEntry& layer : layer_types()) {
    CAPTURE(layer.type);
    CHECK(find_layer_type(layer.type) == &layer);
    CHECK(reported(problems_of(layer, "colour: red", layer.inputs),
                   {"model.layers[1].colour: unknown key"}));
    CHECK(reported(problems_of(layer, "", layer.inputs + 1),
                   {"model.layers[1].inputs: " + layer.type + " takes " +
                    std::to_string(layer.inputs) + " input"}));
    for (const config::KeyDoc& key : layer.options->reference("")) {
      CAPTURE(key.path);
      const std::string at = "model.layers[1]." + key.path + ": ";
      CHECK(reported(problems_of(layer, key.path + ": {x: 1}", layer.inputs), {at + "expected "}));
      if (const auto bad = out_of_range(key.type)) {
        CAPTURE(*bad);
        const auto p = problems_of(layer, key.path + ": " + *bad, layer.inputs);
        CHECK(reported(p, {at + "must be ", at + "expected one of "}));
      }
    }
  }
}

TEST_CASE("the builder makes each layer type from its resolved entry") {
  // Every row builds, from a checked entry, a layer that says it is of that type.
  const std::string options[][2] = {
      {"linear", "out_features: 3"},      {"conv2d", "out_channels: 2, kernel: 1"},
      {"maxpool2d", "kernel: 1"},         {"avgpool2d", "kernel: 1"},
      {"channel_pad", "out_channels: 4"}, {"embedding", "embedding_dim: 4"},
      {"attention", "n_head: 2"}};
  for (const LayerEntry& layer : layer_types()) {
    CAPTURE(layer.type);
    std::string extra;
    for (const auto& o : options)
      if (o[0] == layer.type) extra = ", " + o[1];
    std::string inputs = "[first";
    for (size_t k = 1; k < layer.inputs; ++k) inputs += ", first";
    const auto list = "[{name: first, type: relu}, {name: x, type: " + layer.type +
                      ", inputs: " + inputs + "]" + extra + "}]";
    std::vector<std::string> problems;
    const YAML::Node checked = check_layer_list(YAML::Load(list), problems);
    for (const auto& p : problems) MESSAGE(p);
    REQUIRE(problems.empty());
    const auto built = make_nodes(checked);
    REQUIRE(built.size() == 2);
    CHECK(built[1].layer->type() == layer.type);
    CHECK(static_cast<size_t>(built[1].layer->num_inputs()) == layer.inputs);
  }
}

TEST_CASE("every zoo model: its defaults resolve, and its options are read by its row") {
  for (const ZooEntry& zoo : zoo_models()) {
    CAPTURE(zoo.name);
    std::vector<std::string> problems;
    const YAML::Node m = check_model_spec(YAML::Load("{name: " + zoo.name + "}"), problems);
    CHECK(problems.empty());
    for (const std::string& key : zoo.options->keys()) CHECK(m[key].IsDefined());
    check_model_spec(YAML::Load("{name: " + zoo.name + ", colour: red}"), problems);
    CHECK(reported(problems, {"model.colour: unknown key"}));
  }
}
