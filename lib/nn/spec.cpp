// Validation of the `model:` section on the config schema engine (lib/config): every problem
// is collected (not just the first) with its key path and YAML line, and the returned copy has
// every default filled in so that the resolved config.yaml shows them. A zoo model's options
// and a layer's are read with its row's schema (zoo_table.h, layer_table.h) into its options
// struct and written back with the same schema.
#include "nn/spec.h"

#include <fmt/format.h>  // messages

#include <algorithm>  // find
#include <set>

#include "config/schema.h"  // kinds, Reader, Section
#include "core/error.h"
#include "nn/layer_table.h"  // the layer types
#include "nn/model.h"        // check_model_spec, zoo_names: declared with the Model
#include "nn/zoo_table.h"    // the zoo models

namespace dtrain {

using config::Reader;
using config::Section;

namespace {

// Appends the keys of `options` (written back by their schema) to the map `out`.
void append_options(const config::AnySchema& schema, const std::any& options, YAML::Node& out) {
  const YAML::Node keys = schema.write(options, config::Style::file);
  for (auto it = keys.begin(); it != keys.end(); ++it) out[it->first] = it->second;
}

// "[a, b]" for a layer of two inputs: how its `inputs` look.
std::string inputs_example(size_t arity) {
  std::string list;
  for (size_t k = 0; k < arity; ++k) list += (k ? ", " : "") + std::string(1, char('a' + k));
  return "[" + list + "]";
}

// The entry's `inputs` as checked names (earlier layers or "input"), added to `read`.
// `layer` is null when the entry's type is missing or unknown (its arity cannot be judged).
YAML::Node check_inputs(Section& entry, const LayerEntry* layer, size_t index,
                        const std::vector<std::string>& names, std::set<std::string>& read) {
  Reader& r = entry.reader();
  const size_t arity = layer ? layer->inputs : 1;
  const YAML::Node in = entry.get("inputs");
  YAML::Node list(YAML::NodeType::Sequence);
  if (!in.IsDefined() || in.IsNull()) {
    if (arity != 1)
      r.add(entry.path_of("inputs"),
            fmt::format("{} needs `inputs: {}`", layer->type, inputs_example(arity)), entry.node());
    if (index > 0) read.insert(names[index - 1]);
    return YAML::Node();
  }
  if (!in.IsSequence()) {
    r.add(entry.path_of("inputs"),
          in.IsScalar() ? "expected a list of layer names, e.g. [" + in.Scalar() + "]"
                        : "expected a list of layer names, got " + config::describe_node(in),
          in);
    return YAML::Node();
  }
  const auto earlier_end = names.begin() + static_cast<std::ptrdiff_t>(index);
  for (size_t k = 0; k < in.size(); ++k) {
    const std::string at = config::element_path(entry.path_of("inputs"), k);
    std::string one;
    if (!config::read_text(r, at, in[k], one)) continue;
    if (one != Graph::kInputName && std::find(names.begin(), earlier_end, one) == earlier_end) {
      r.add(at, "unknown layer '" + one + "' (inputs must name earlier layers or 'input')", in[k]);
      continue;
    }
    list.push_back(one);
    read.insert(one);
  }
  if (layer && in.size() != arity)
    r.add(entry.path_of("inputs"),
          fmt::format("{} takes {} input{}, got {}", layer->type, arity, arity == 1 ? "" : "s",
                      in.size()),
          in);
  return config::flow(list);
}

// A `layers:` entry's `block` (model.recompute: blocks), "" when it has none, appended to
// `blocks` (every earlier entry's): consecutive entries of one name are one block, so a name
// that comes back after another block is a problem.
std::string check_block(Section& entry, std::vector<std::string>& blocks) {
  std::string block;
  if (entry.has("block") &&
      config::nonempty_text().read(entry.reader(), entry.path_of("block"), entry.get("block"),
                                   block) &&
      std::find(blocks.begin(), blocks.end(), block) != blocks.end() && blocks.back() != block) {
    entry.reader().add(entry.path_of("block"),
                       "block '" + block +
                           "' is not consecutive: the layers of a block follow each other in "
                           "the list",
                       entry.get("block"));
    block.clear();
  }
  blocks.push_back(block);
  return block;
}

// model.recompute, a key of every model: "none" or "blocks". `blocks` says whether the model has
// any (a `layers:` entry's `block`, a zoo model's transformer or residual blocks).
void check_recompute(Section& model, bool blocks, const std::string& what, YAML::Node& out) {
  std::string recompute = "none";
  if (model.has("recompute") &&
      config::choice({"none", "blocks"})
          .read(model.reader(), "model.recompute", model.get("recompute"), recompute) &&
      recompute == "blocks" && !blocks)
    model.reader().add("model.recompute",
                       "blocks: " + what +
                           " has no blocks to recompute (the gpt, gpt2 and "
                           "ResNet models have; a `layers:` list marks them with `block:`)",
                       model.get("recompute"));
  out["recompute"] = recompute;
}

// The name of a `layers:` entry that gives none: its type and its 0-based position in the list
// ("linear0", "relu1"), as PyTorch's nn.Sequential names its children by position. Written into
// the resolved list, so config.yaml, the weights file and a resumed run all see it.
std::string default_layer_name(const std::string& type, size_t index) {
  return type + std::to_string(index);
}

YAML::Node check_layers(Section& model, const std::string& key) {
  Reader& r = model.reader();
  YAML::Node out(YAML::NodeType::Sequence);
  const YAML::Node layers = model.get(key);
  if (!layers.IsSequence() || layers.size() == 0) {
    r.add(model.path_of(key), "must be a non-empty list of layers", layers);
    return out;
  }
  std::vector<Section> entries = model.children(key);
  if (entries.size() != layers.size()) {  // non-map entries were reported; the rest not judged
    for (Section& e : entries) e.accept_all();
    return out;
  }
  const std::vector<std::string> types = layer_type_names();
  std::vector<std::string> blocks;  // each entry's `block`, "" for none
  std::vector<std::string> names;   // in order; "" for entries without a usable name
  std::vector<bool> defaulted;      // names[i] is the entry's default name (it gave none)
  std::set<std::string> read;       // names some layer reads
  // Where the name `name` is already taken, or -1.
  auto taken = [&](const std::string& name) {
    const auto at = std::find(names.begin(), names.end(), name);
    return at == names.end() ? -1 : static_cast<int>(at - names.begin());
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    Section& e = entries[i];
    std::string name;
    const bool named = e.has("name");
    if (named && config::nonempty_text().read(r, e.path_of("name"), e.get("name"), name)) {
      const int other = taken(name);
      if (name == Graph::kInputName) {
        r.add(e.path_of("name"), "'input' is reserved for the model input", e.get("name"));
        name.clear();
      } else if (other >= 0) {
        const size_t k = static_cast<size_t>(other);
        r.add(e.path_of("name"),
              defaulted[k] ? fmt::format("'{}' is {}'s default name (its type and position); give "
                                         "one of the two another name",
                                         name, entries[k].path())
                           : "duplicate name '" + name + "'",
              e.get("name"));
        name.clear();
      }
    }
    std::string type;
    if (!e.require("type", "one of " + fmt::format("{}", fmt::join(types, ", "))) ||
        !config::choice(types).read(r, e.path_of("type"), e.get("type"), type))
      e.accept_all();  // options of a missing or unknown type cannot be judged
    const LayerEntry* layer = type.empty() ? nullptr : find_layer_type(type);
    if (!named && layer) {
      name = default_layer_name(type, i);
      const int other = taken(name);
      if (other >= 0) {
        r.add(e.path(),
              fmt::format("its default name '{}' (its type and position) is taken by {}; give "
                          "one of the two another name",
                          name, entries[static_cast<size_t>(other)].path()),
              e.node());
        name.clear();
      }
    }
    YAML::Node o(YAML::NodeType::Map);
    if (!name.empty()) o["name"] = name;
    names.push_back(name);
    defaulted.push_back(!named);
    if (layer) o["type"] = type;
    YAML::Node inputs = check_inputs(e, layer, i, names, read);
    if (inputs.IsDefined()) o["inputs"] = inputs;
    const std::string block = check_block(e, blocks);
    if (!block.empty()) o["block"] = block;
    if (layer) {
      std::any options = layer->options->defaults();
      layer->options->read(e, options);
      append_options(*layer->options, options, o);
    }
    out.push_back(o);
  }
  for (size_t i = 0; i + 1 < names.size(); ++i)
    if (!names[i].empty() && read.count(names[i]) == 0) {
      // A default name has no `name` key to point at: the entry itself is named.
      Section& e = entries[i];
      r.add(defaulted[i] ? e.path() : e.path_of("name"),
            "layer '" + names[i] + "' is not read by any layer (only the last layer is the output)",
            defaulted[i] ? e.node() : e.get("name"));
    }
  return out;
}

// A Reader over {model: spec} for the standalone checks, and its problems as
// "model.hidden[1]: must be > 0 (line 4)".
template <class Check>
YAML::Node standalone(const YAML::Node& spec, std::vector<std::string>& problems, Check check) {
  YAML::Node root(YAML::NodeType::Map);
  root["model"] = spec;
  Reader reader("", root, {});
  Section top(reader, root, "");
  YAML::Node out = check(top);
  reader.report_unknown_keys();
  for (const auto& p : reader.problems()) {
    std::string text = p.path.empty() ? p.message : p.path + ": " + p.message;
    if (p.origin.line > 0) text += fmt::format(" (line {})", p.origin.line);
    problems.push_back(std::move(text));
  }
  return out;
}

}  // namespace

YAML::Node check_model_section(Section& top) {
  Reader& r = top.reader();
  const char* what = "a map with a zoo model `name` (e.g. {name: mlp}) or a custom `layers` list";
  YAML::Node out(YAML::NodeType::Map);
  if (!top.require("model", what)) return out;
  const YAML::Node node = top.get("model");
  if (!node.IsMap()) {
    r.add("model", fmt::format("expected {}, got {}", what, config::describe_node(node)), node);
    return out;
  }
  Section model = top.child("model");
  // Looked at, not asked for: a zoo model does not take `layers` (nor a graph `name`).
  const bool has_name = node["name"].IsDefined(), has_layers = node["layers"].IsDefined();
  if (has_name && has_layers) {
    r.add("model", "give either `name` (a zoo model) or `layers` (a custom graph), not both",
          model.node());
    model.accept_all();
    return out;
  }
  if (has_layers) {
    out["layers"] = check_layers(model, "layers");
    bool blocks = false;
    for (const YAML::Node& e : out["layers"]) blocks |= e["block"].IsDefined();
    check_recompute(model, blocks, "the `layers:` list", out);
    return out;
  }
  if (!has_name) {
    r.add("model",
          fmt::format("needs `name` or `layers`: a zoo model (one of: {}) or a custom graph",
                      fmt::join(zoo_names(), ", ")),
          model.node());
    // A misspelt `name` or `layers` is named, with its "did you mean"; other keys may be a zoo
    // model's options, which cannot be judged without the model.
    model.get("name");
    model.get("layers");
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      if (!config::closest(key, {"name", "layers"})) model.get(key);
    }
    return out;
  }
  std::string name;
  if (!config::choice(zoo_names()).read(r, "model.name", model.get("name"), name)) {
    model.accept_all();
    return out;
  }
  out["name"] = name;
  const ZooEntry& zoo = *find_zoo_model(name);
  std::any options = zoo.options->defaults();
  zoo.options->read(model, options);
  append_options(*zoo.options, options, out);
  check_recompute(model, zoo.blocks, "model '" + name + "'", out);
  return out;
}

YAML::Node check_model_spec(const YAML::Node& model, std::vector<std::string>& problems) {
  return standalone(model, problems, [](Section& top) { return check_model_section(top); });
}

YAML::Node check_layer_list(const YAML::Node& layers, std::vector<std::string>& problems) {
  YAML::Node spec(YAML::NodeType::Map);
  spec["layers"] = layers;
  return standalone(spec, problems, [](Section& top) {
    Section model = top.child("model");
    return check_layers(model, "layers");
  });
}

std::vector<config::KeyDoc> model_reference() {
  std::vector<config::KeyDoc> rows{
      {"model.recompute", "none | blocks", "none", true,
       "activation recomputation: blocks keeps only each block's input in the training forward "
       "and runs the block's forward again just before its backward (less activation memory, "
       "about one more forward of time; results bit for bit the same; docs/memory.md)",
       ""},
      {"model.layers[].block", "non-empty text", "absent", false,
       "the block the layer belongs to (consecutive layers of one name), for model.recompute: "
       "blocks; the zoo's GPT and ResNet lists mark their transformer and residual blocks",
       ""}};
  for (const ZooEntry& zoo : zoo_models())
    for (auto row : zoo.options->reference("model")) {
      row.applies = "model " + zoo.name;
      rows.push_back(std::move(row));
    }
  for (const LayerEntry& layer : layer_types())
    for (auto row : layer.options->reference("model.layers[]")) {
      row.applies = "type " + layer.type;
      rows.push_back(std::move(row));
    }
  return config::merge_alike(rows);
}

std::string model_help() {
  return zoo_help() + layers_help();
}

std::string model_markdown() {
  return zoo_markdown() + "\n" + layers_markdown();
}

void throw_if_problems(const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string text;
  for (const auto& p : problems) text += (text.empty() ? "" : "\n") + p;
  throw InputError(text);
}

}  // namespace dtrain
