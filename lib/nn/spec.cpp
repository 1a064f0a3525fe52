// Validation of the `model:` section on the config schema engine (lib/config): every problem
// is collected (not just the first) with its key path and YAML line, and the returned copy has
// every default filled in so that the resolved config.yaml shows them.
#include "nn/spec.h"

#include <fmt/format.h>  // messages

#include <algorithm>  // find
#include <set>

#include "config/schema.h"  // Schema, kinds, Reader, Section
#include "core/error.h"

namespace dtrain {

using config::Bounds;
using config::Kind;
using config::Reader;
using config::Schema;
using config::Section;

namespace {

using NodeSchema = Schema<YAML::Node>;

// An integer, or a [height, width] pair of them (kernel, stride, padding).
Kind<std::vector<int64_t>> pair_kind(Bounds bounds) {
  const Kind<int64_t> one = config::integer64(bounds);
  Kind<std::vector<int64_t>> k;
  k.type = one.type + " or [height, width]";
  k.read = [one](Reader& r, const std::string& path, const YAML::Node& node,
                 std::vector<int64_t>& out) {
    if (node.IsScalar()) {
      int64_t v = 0;
      if (!one.read(r, path, node, v)) return false;
      out = {v};
      return true;
    }
    if (!node.IsSequence() || node.size() != 2) {
      r.add(
          path,
          "expected " + one.type + " or a [height, width] pair, got " + config::describe_node(node),
          node);
      return false;
    }
    std::vector<int64_t> hw(2);
    bool ok = one.read(r, config::element_path(path, 0), node[0], hw[0]);
    ok &= one.read(r, config::element_path(path, 1), node[1], hw[1]);
    if (ok) out = hw;
    return ok;
  };
  k.write = [](const std::vector<int64_t>& v) {
    if (v.size() == 1) return YAML::Node(v[0]);
    YAML::Node list(YAML::NodeType::Sequence);
    for (int64_t x : v) list.push_back(x);
    return config::flow(list);
  };
  return k;
}

const auto kPositive = Bounds::above(0);
const auto kNonNegative = Bounds::at_least(0);
const std::vector<std::string> kWeightInits{"pytorch", "kaiming_normal_fan_out",
                                            "kaiming_normal_fan_in", "normal"};

NodeSchema& with_init(NodeSchema& s) {
  return s
      .option("weight_init", config::choice(kWeightInits), "pytorch",
              "weight initialisation (PyTorch's default, Kaiming normal, or normal with init_std)")
      .option("init_std", config::real(kPositive), "", "standard deviation for weight_init normal")
      .fallback(
          [](YAML::Node& out) {
            const YAML::Node& o = out;
            if (o["weight_init"] && o["weight_init"].as<std::string>() == "normal")
              out["init_std"] = 0.01;
          },
          "0.01 with weight_init normal")
      .option("bias_init", config::choice({"pytorch", "zero"}), "pytorch", "bias initialisation");
}

const NodeSchema& linear_schema() {
  static const NodeSchema s = [] {
    NodeSchema s("linear");
    s.option("out_features", config::integer64(kPositive), "", "outputs")
        .required("the number of outputs")
        .option("in_features", config::integer64(kPositive), "",
                "inputs (checked against the graph when given)")
        .option("bias", config::boolean(), "true", "learn a bias");
    return with_init(s);
  }();
  return s;
}

const NodeSchema& conv2d_schema() {
  static const NodeSchema s = [] {
    NodeSchema s("conv2d");
    s.option("out_channels", config::integer64(kPositive), "", "output channels")
        .required("the number of output channels")
        .option("in_channels", config::integer64(kPositive), "",
                "input channels (checked against the graph when given)")
        .option("kernel", pair_kind(kPositive), "", "kernel size")
        .required("the kernel size, e.g. 3 or [3, 5]")
        .option("stride", pair_kind(kPositive), "1", "stride")
        .option("padding", pair_kind(kNonNegative), "0", "zero padding on each side")
        .option("bias", config::boolean(), "true", "learn a bias");
    return with_init(s);
  }();
  return s;
}

NodeSchema pool_schema(const char* noun, bool average) {
  NodeSchema s(noun);
  s.option("kernel", pair_kind(kPositive), "", "window size")
      .required("the window size, e.g. 2 or [2, 3]")
      .option("stride", pair_kind(kPositive), "", "stride")
      .fallback(
          [](YAML::Node& out) {
            const YAML::Node& o = out;
            if (o["kernel"]) out["stride"] = YAML::Clone(o["kernel"]);
          },
          "kernel")
      .option("padding", pair_kind(kNonNegative), "0", "padding on each side")
      .option("ceil_mode", config::boolean(), "false", "round the output size up");
  if (average)
    s.option("count_include_pad", config::boolean(), "true",
             "divide by the whole window, padding included");
  return s;
}

const NodeSchema& layer_schema(const std::string& type) {
  static const NodeSchema none("layer");
  static const NodeSchema maxpool = pool_schema("maxpool2d", false);
  static const NodeSchema avgpool = pool_schema("avgpool2d", true);
  static const NodeSchema lrn =
      NodeSchema("lrn")
          .option("size", config::integer64(kPositive), "5", "channels in the window")
          .option("alpha", config::real(kPositive), "0.0001", "scale (PyTorch's convention)")
          .option("beta", config::real(kPositive), "0.75", "exponent")
          .option("k", config::real(kPositive), "2", "additive constant");
  static const NodeSchema dropout = NodeSchema("dropout").option(
      "p", config::real(Bounds::closed_open(0, 1)), "0.5", "probability of zeroing an element");
  static const NodeSchema batchnorm =
      NodeSchema("batchnorm2d")
          .option("eps", config::real(kPositive), "0.00001", "added to the variance")
          .option("momentum", config::real(Bounds::open_closed(0, 1)), "0.1",
                  "running statistics' update factor");
  static const NodeSchema channel_pad =
      NodeSchema("channel_pad")
          .option("out_channels", config::integer64(kPositive), "", "channels after padding")
          .required("the number of output channels")
          .option("stride", config::integer64(kPositive), "1", "spatial subsampling");
  if (type == "linear") return linear_schema();
  if (type == "conv2d") return conv2d_schema();
  if (type == "maxpool2d") return maxpool;
  if (type == "avgpool2d") return avgpool;
  if (type == "lrn") return lrn;
  if (type == "dropout") return dropout;
  if (type == "batchnorm2d") return batchnorm;
  if (type == "channel_pad") return channel_pad;
  return none;
}

const NodeSchema& zoo_schema(const std::string& name) {
  static const NodeSchema none("model");
  static const NodeSchema mlp =
      NodeSchema("mlp").option("hidden", config::list_of(config::integer64(kPositive)),
                               "[500, 500]", "widths of the hidden layers");
  static const NodeSchema cifar_cnn =
      NodeSchema("cifar_cnn")
          .option("lrn", config::boolean(), "false", "local response normalisation after block 1")
          .option("init", config::choice({"caffe", "pytorch"}), "caffe",
                  "the prototxt's Gaussians or PyTorch's defaults");
  static const NodeSchema alexnet =
      NodeSchema("alexnet")
          .option("lrn", config::boolean(), "false", "the original's LRN layers")
          .option("dropout", config::real(Bounds::closed_open(0, 1)), "0.5",
                  "dropout before the fully connected layers");
  static const NodeSchema vgg =
      NodeSchema("vgg16")
          .option("batch_norm", config::boolean(), "false", "batch norm after each convolution")
          .option("dropout", config::real(Bounds::closed_open(0, 1)), "0.5",
                  "dropout in the classifier");
  static const NodeSchema resnet = NodeSchema("resnet").option(
      "small_input", config::word_or({"auto"}, config::boolean()), "auto",
      "CIFAR-style stem (3×3 conv, no pooling); auto: for inputs of at most 64 pixels");
  static const NodeSchema resnet20 =
      NodeSchema("resnet20")
          .option("shortcut", config::choice({"A", "B"}), "A",
                  "A: identity with zero-padded channels; B: 1×1 projection");
  if (name == "mlp") return mlp;
  if (name == "cifar_cnn") return cifar_cnn;
  if (name == "alexnet") return alexnet;
  if (name == "vgg16") return vgg;
  if (name == "resnet18" || name == "resnet50") return resnet;
  if (name == "resnet20") return resnet20;
  return none;
}

// The entry's `inputs` as checked names (earlier layers or "input"), added to `read`.
YAML::Node check_inputs(Section& entry, const std::string& type, size_t index,
                        const std::vector<std::string>& names, std::set<std::string>& read) {
  Reader& r = entry.reader();
  const size_t arity = type == "add" ? 2 : 1;
  const YAML::Node in = entry.get("inputs");
  YAML::Node list(YAML::NodeType::Sequence);
  if (!in.IsDefined() || in.IsNull()) {
    if (arity != 1 && !type.empty())
      r.add(entry.path_of("inputs"), fmt::format("{} needs `inputs: [a, b]`", type), entry.node());
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
  if (!type.empty() && in.size() != arity)
    r.add(entry.path_of("inputs"),
          fmt::format("{} takes {} input{}, got {}", type, arity, arity == 1 ? "" : "s", in.size()),
          in);
  return config::flow(list);
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
  const auto& types = layer_type_names();
  std::vector<std::string> names;  // in order; "" for entries without a usable name
  std::set<std::string> read;      // names some layer reads
  for (size_t i = 0; i < entries.size(); ++i) {
    Section& e = entries[i];
    YAML::Node o(YAML::NodeType::Map);
    std::string name;
    if (e.require("name", "a unique name for the layer") &&
        config::nonempty_text().read(r, e.path_of("name"), e.get("name"), name)) {
      if (name == Graph::kInputName) {
        r.add(e.path_of("name"), "'input' is reserved for the model input", e.get("name"));
        name.clear();
      } else if (std::find(names.begin(), names.end(), name) != names.end()) {
        r.add(e.path_of("name"), "duplicate name '" + name + "'", e.get("name"));
        name.clear();
      }
    }
    if (!name.empty()) o["name"] = name;
    names.push_back(name);
    std::string type;
    if (!e.require("type", "one of " + fmt::format("{}", fmt::join(types, ", "))) ||
        !config::choice(types).read(r, e.path_of("type"), e.get("type"), type))
      e.accept_all();  // options of a missing or unknown type cannot be judged
    if (!type.empty()) o["type"] = type;
    YAML::Node inputs = check_inputs(e, type, i, names, read);
    if (inputs.IsDefined()) o["inputs"] = inputs;
    if (!type.empty()) layer_schema(type).read(e, o);
    out.push_back(o);
  }
  for (size_t i = 0; i + 1 < names.size(); ++i)
    if (!names[i].empty() && read.count(names[i]) == 0)
      r.add(entries[i].path_of("name"),
            "layer '" + names[i] + "' is not read by any layer (only the last layer is the output)",
            entries[i].get("name"));
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

const std::vector<std::string>& layer_type_names() {
  static const std::vector<std::string> names{
      "linear",  "conv2d",      "maxpool2d", "avgpool2d", "global_avgpool", "relu", "lrn",
      "dropout", "batchnorm2d", "flatten",   "add",       "channel_pad"};
  return names;
}

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
  std::string zoo;
  if (!config::choice(zoo_names()).read(r, "model.name", model.get("name"), zoo)) {
    model.accept_all();
    return out;
  }
  out["name"] = zoo;
  zoo_schema(zoo).read(model, out);
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
  std::vector<config::KeyDoc> rows;
  for (const auto& name : zoo_names())
    for (auto row : zoo_schema(name).reference("model")) {
      row.applies = "model " + name;
      rows.push_back(std::move(row));
    }
  for (const auto& type : layer_type_names())
    for (auto row : layer_schema(type).reference("model.layers[]")) {
      row.applies = "type " + type;
      rows.push_back(std::move(row));
    }
  return config::merge_alike(rows);
}

void throw_if_problems(const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string text;
  for (const auto& p : problems) text += (text.empty() ? "" : "\n") + p;
  throw InputError(text);
}

}  // namespace dtrain
