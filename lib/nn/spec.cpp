// Validation of the `model:` section: every problem is collected (not just the first), each
// names the key path and the YAML line, and the returned copy has every default filled in so
// that the resolved config.yaml shows them.
#include "nn/spec.h"

#include <fmt/format.h>  // messages

#include <algorithm>  // find
#include <set>

#include "core/error.h"

namespace dtrain {
namespace {

std::string line_of(const YAML::Node& node) {
  try {
    const YAML::Mark mark = node.Mark();
    if (mark.line >= 0) return fmt::format(" (line {})", mark.line + 1);
  } catch (const YAML::Exception&) {
  }
  return "";
}

void problem(std::vector<std::string>& problems, const std::string& path, const std::string& what,
             const YAML::Node& where) {
  problems.push_back(path + ": " + what + line_of(where));
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

enum class Kind {
  positive_int,
  nonneg_int,
  positive_pair,  // an integer or [height, width]
  nonneg_pair,
  boolean,
  positive_float,
  fraction,  // [0, 1)
  unit,      // (0, 1]
  choice,
  bool_or_auto,
  positive_int_list,
};

struct Option {
  std::string key;
  Kind kind;
  // YAML text of the default; "" = required; "-" = optional, no default; "=key" = that key's value.
  std::string fallback;
  std::vector<std::string> choices = {};
};

template <typename T>
bool scalar_as(const YAML::Node& node, T& value) {
  if (!node.IsScalar()) return false;
  try {
    value = node.as<T>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

// Validates one value; returns it normalised, or an undefined node (problem recorded).
YAML::Node check_value(const YAML::Node& v, const Option& o, const std::string& path,
                       std::vector<std::string>& problems) {
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  auto fail = [&](const std::string& what) {
    problem(problems, path, what, v);
    return YAML::Node();
  };
  switch (o.kind) {
    case Kind::positive_int:
      if (!scalar_as(v, i)) return fail("must be a positive integer");
      if (i <= 0) return fail("must be > 0");
      return YAML::Node(i);
    case Kind::nonneg_int:
      if (!scalar_as(v, i)) return fail("must be a non-negative integer");
      if (i < 0) return fail("must be >= 0");
      return YAML::Node(i);
    case Kind::positive_pair:
    case Kind::nonneg_pair: {
      const bool pos = o.kind == Kind::positive_pair;
      const std::string what = pos ? "must be a positive integer or a [height, width] pair"
                                   : "must be a non-negative integer or a [height, width] pair";
      if (v.IsScalar()) {
        if (!scalar_as(v, i)) return fail(what);
        if (pos ? i <= 0 : i < 0) return fail(pos ? "must be > 0" : "must be >= 0");
        return YAML::Node(i);
      }
      if (!v.IsSequence() || v.size() != 2) return fail(what);
      YAML::Node out(YAML::NodeType::Sequence);
      out.SetStyle(YAML::EmitterStyle::Flow);
      bool ok = true;
      for (size_t k = 0; k < 2; ++k) {
        const std::string at = fmt::format("{}[{}]", path, k);
        if (!scalar_as(v[k], i)) {
          problem(problems, at,
                  pos ? "must be a positive integer" : "must be a non-negative integer", v[k]);
          ok = false;
        } else if (pos ? i <= 0 : i < 0) {
          problem(problems, at, pos ? "must be > 0" : "must be >= 0", v[k]);
          ok = false;
        }
        out.push_back(i);
      }
      return ok ? out : YAML::Node();
    }
    case Kind::boolean:
      if (!scalar_as(v, b)) return fail("must be true or false");
      return YAML::Node(b);
    case Kind::bool_or_auto:
      if (scalar_as(v, s) && s == "auto") return YAML::Node("auto");
      if (!scalar_as(v, b)) return fail("must be true, false or auto");
      return YAML::Node(b);
    case Kind::positive_float:
      if (!scalar_as(v, d)) return fail("must be a number");
      if (!(d > 0)) return fail("must be > 0");
      return YAML::Node(d);
    case Kind::fraction:
      if (!scalar_as(v, d)) return fail("must be a number");
      if (!(d >= 0 && d < 1)) return fail("must be in [0, 1)");
      return YAML::Node(d);
    case Kind::unit:
      if (!scalar_as(v, d)) return fail("must be a number");
      if (!(d > 0 && d <= 1)) return fail("must be in (0, 1]");
      return YAML::Node(d);
    case Kind::choice:
      if (!scalar_as(v, s) || std::find(o.choices.begin(), o.choices.end(), s) == o.choices.end())
        return fail("must be one of: " + join(o.choices));
      return YAML::Node(s);
    case Kind::positive_int_list: {
      if (!v.IsSequence()) return fail("must be a list of positive integers");
      YAML::Node out(YAML::NodeType::Sequence);
      out.SetStyle(YAML::EmitterStyle::Flow);
      bool ok = true;
      for (size_t k = 0; k < v.size(); ++k) {
        const std::string at = fmt::format("{}[{}]", path, k);
        if (!scalar_as(v[k], i)) {
          problem(problems, at, "must be a positive integer", v[k]);
          ok = false;
        } else if (i <= 0) {
          problem(problems, at, "must be > 0", v[k]);
          ok = false;
        }
        out.push_back(i);
      }
      return ok ? out : YAML::Node();
    }
  }
  return YAML::Node();
}

// Copies the options of `schema` from `in` to `out`, filling defaults; keys neither in the
// schema nor in `handled` are problems.
void check_options(const YAML::Node& in, const std::string& path, const std::vector<Option>& schema,
                   const std::set<std::string>& handled, const std::string& owner, YAML::Node& out,
                   std::vector<std::string>& problems) {
  for (auto it = in.begin(); it != in.end(); ++it) {
    std::string key;
    if (!scalar_as(it->first, key)) {
      problem(problems, path, "keys must be strings", it->first);
      continue;
    }
    bool known = handled.count(key) > 0;
    for (const Option& o : schema) known |= o.key == key;
    if (!known) {
      std::vector<std::string> keys;
      for (const Option& o : schema) keys.push_back(o.key);
      problem(problems, path + "." + key,
              "unknown option for " + owner +
                  (keys.empty() ? " (it takes none)" : " (known: " + join(keys) + ")"),
              it->first);
    }
  }
  for (const Option& o : schema) {
    const YAML::Node v = in[o.key];
    const std::string at = path + "." + o.key;
    if (v.IsDefined() && !v.IsNull()) {
      YAML::Node checked = check_value(v, o, at, problems);
      if (checked.IsDefined()) out[o.key] = checked;
    } else if (o.fallback.empty()) {
      problem(problems, at, "missing (required for " + owner + ")", in);
    } else if (o.fallback[0] == '=') {
      const YAML::Node same = out[o.fallback.substr(1)];
      if (same.IsDefined()) out[o.key] = YAML::Clone(same);
    } else if (o.fallback != "-") {
      YAML::Node def = YAML::Load(o.fallback);
      if (def.IsSequence()) def.SetStyle(YAML::EmitterStyle::Flow);
      out[o.key] = def;
    }
  }
}

// ---- schemas -------------------------------------------------------------------------------

const std::vector<std::string> kWeightInits{"pytorch", "kaiming_normal_fan_out",
                                            "kaiming_normal_fan_in", "normal"};

const std::vector<Option>& layer_schema(const std::string& type) {
  static const std::vector<Option> none;
  static const std::vector<Option> linear{
      {"out_features", Kind::positive_int, ""},
      {"in_features", Kind::positive_int, "-"},
      {"bias", Kind::boolean, "true"},
      {"weight_init", Kind::choice, "pytorch", kWeightInits},
      {"init_std", Kind::positive_float, "-"},
      {"bias_init", Kind::choice, "pytorch", {"pytorch", "zero"}}};
  static const std::vector<Option> conv2d{
      {"out_channels", Kind::positive_int, ""},
      {"in_channels", Kind::positive_int, "-"},
      {"kernel", Kind::positive_pair, ""},
      {"stride", Kind::positive_pair, "1"},
      {"padding", Kind::nonneg_pair, "0"},
      {"bias", Kind::boolean, "true"},
      {"weight_init", Kind::choice, "pytorch", kWeightInits},
      {"init_std", Kind::positive_float, "-"},
      {"bias_init", Kind::choice, "pytorch", {"pytorch", "zero"}}};
  static const std::vector<Option> maxpool{{"kernel", Kind::positive_pair, ""},
                                           {"stride", Kind::positive_pair, "=kernel"},
                                           {"padding", Kind::nonneg_pair, "0"},
                                           {"ceil_mode", Kind::boolean, "false"}};
  static const std::vector<Option> avgpool{{"kernel", Kind::positive_pair, ""},
                                           {"stride", Kind::positive_pair, "=kernel"},
                                           {"padding", Kind::nonneg_pair, "0"},
                                           {"ceil_mode", Kind::boolean, "false"},
                                           {"count_include_pad", Kind::boolean, "true"}};
  static const std::vector<Option> lrn{{"size", Kind::positive_int, "5"},
                                       {"alpha", Kind::positive_float, "0.0001"},
                                       {"beta", Kind::positive_float, "0.75"},
                                       {"k", Kind::positive_float, "2"}};
  static const std::vector<Option> dropout{{"p", Kind::fraction, "0.5"}};
  static const std::vector<Option> batchnorm{{"eps", Kind::positive_float, "0.00001"},
                                             {"momentum", Kind::unit, "0.1"}};
  static const std::vector<Option> channel_pad{{"out_channels", Kind::positive_int, ""},
                                               {"stride", Kind::positive_int, "1"}};
  if (type == "linear") return linear;
  if (type == "conv2d") return conv2d;
  if (type == "maxpool2d") return maxpool;
  if (type == "avgpool2d") return avgpool;
  if (type == "lrn") return lrn;
  if (type == "dropout") return dropout;
  if (type == "batchnorm2d") return batchnorm;
  if (type == "channel_pad") return channel_pad;
  return none;
}

const std::vector<Option>& zoo_schema(const std::string& name) {
  static const std::vector<Option> none;
  static const std::vector<Option> mlp{{"hidden", Kind::positive_int_list, "[500, 500]"}};
  static const std::vector<Option> cifar_cnn{{"lrn", Kind::boolean, "false"},
                                             {"init", Kind::choice, "caffe", {"caffe", "pytorch"}}};
  static const std::vector<Option> alexnet{{"lrn", Kind::boolean, "false"},
                                           {"dropout", Kind::fraction, "0.5"}};
  static const std::vector<Option> vgg{{"batch_norm", Kind::boolean, "false"},
                                       {"dropout", Kind::fraction, "0.5"}};
  static const std::vector<Option> resnet{{"small_input", Kind::bool_or_auto, "auto"}};
  static const std::vector<Option> resnet20{{"shortcut", Kind::choice, "A", {"A", "B"}}};
  if (name == "mlp") return mlp;
  if (name == "cifar_cnn") return cifar_cnn;
  if (name == "alexnet") return alexnet;
  if (name == "vgg16") return vgg;
  if (name == "resnet18" || name == "resnet50") return resnet;
  if (name == "resnet20") return resnet20;
  return none;
}

}  // namespace

const std::vector<std::string>& layer_type_names() {
  static const std::vector<std::string> names{
      "linear",  "conv2d",      "maxpool2d", "avgpool2d", "global_avgpool", "relu", "lrn",
      "dropout", "batchnorm2d", "flatten",   "add",       "channel_pad"};
  return names;
}

void check_zoo_options(const std::string& name, const YAML::Node& model, YAML::Node& out,
                       std::vector<std::string>& problems) {
  check_options(model, "model", zoo_schema(name), {"name"}, "model '" + name + "'", out, problems);
}

YAML::Node check_layer_list(const YAML::Node& layers, const std::string& path,
                            std::vector<std::string>& problems) {
  YAML::Node out(YAML::NodeType::Sequence);
  if (!layers.IsSequence() || layers.size() == 0) {
    problem(problems, path, "must be a non-empty list of layers", layers);
    return out;
  }
  const auto& types = layer_type_names();
  std::vector<std::string> names;  // in order; "" for entries without a usable name
  std::set<std::string> read;      // names some layer reads
  for (size_t i = 0; i < layers.size(); ++i) {
    const YAML::Node entry = layers[i];
    const std::string at = fmt::format("{}[{}]", path, i);
    YAML::Node o(YAML::NodeType::Map);
    std::string name;
    if (!entry.IsMap()) {
      problem(problems, at, "must be a map with `name` and `type`", entry);
      names.emplace_back();
      continue;
    }
    // name
    const YAML::Node n = entry["name"];
    if (!n.IsDefined() || n.IsNull()) {
      problem(problems, at + ".name", "missing", entry);
    } else if (!scalar_as(n, name) || name.empty()) {
      problem(problems, at + ".name", "must be a non-empty string", n);
      name.clear();
    } else if (name == Graph::kInputName) {
      problem(problems, at + ".name", "'input' is reserved for the model input", n);
      name.clear();
    } else if (std::find(names.begin(), names.end(), name) != names.end()) {
      problem(problems, at + ".name", "duplicate name '" + name + "'", n);
      name.clear();
    }
    if (!name.empty()) o["name"] = name;
    names.push_back(name);
    // type
    std::string type;
    const YAML::Node t = entry["type"];
    if (!t.IsDefined() || t.IsNull()) {
      problem(problems, at + ".type", "missing (one of: " + join(types) + ")", entry);
    } else if (!scalar_as(t, type) || std::find(types.begin(), types.end(), type) == types.end()) {
      problem(problems, at + ".type",
              "unknown layer type '" + (type.empty() ? YAML::Dump(t) : type) +
                  "' (known: " + join(types) + ")",
              t);
      type.clear();
    } else {
      o["type"] = type;
    }
    // inputs
    const size_t arity = type == "add" ? 2 : 1;
    const YAML::Node in = entry["inputs"];
    if (in.IsDefined() && !in.IsNull()) {
      std::vector<std::string> list;
      std::string one;
      if (in.IsSequence()) {
        for (size_t k = 0; k < in.size(); ++k) {
          const std::string ik = fmt::format("{}.inputs[{}]", at, k);
          if (!scalar_as(in[k], one) || one.empty()) {
            problem(problems, ik, "must be a layer name", in[k]);
          } else if (one != Graph::kInputName &&
                     std::find(names.begin(), names.end() - 1, one) == names.end() - 1) {
            problem(problems, ik,
                    "unknown layer '" + one + "' (inputs must name earlier layers or 'input')",
                    in[k]);
          } else {
            list.push_back(one);
            read.insert(one);
          }
        }
      } else if (scalar_as(in, one)) {
        problem(problems, at + ".inputs", "must be a list of layer names, e.g. [" + one + "]", in);
      } else {
        problem(problems, at + ".inputs", "must be a list of layer names", in);
      }
      if (!type.empty() && in.IsSequence() && in.size() != arity)
        problem(problems, at + ".inputs",
                fmt::format("{} takes {} input{}, got {}", type, arity, arity == 1 ? "" : "s",
                            in.size()),
                in);
      YAML::Node l(YAML::NodeType::Sequence);
      l.SetStyle(YAML::EmitterStyle::Flow);
      for (const auto& s : list) l.push_back(s);
      o["inputs"] = l;
    } else {
      if (arity != 1)
        problem(problems, at + ".inputs", fmt::format("{} needs `inputs: [a, b]`", type), entry);
      if (i > 0) read.insert(names[i - 1]);
    }
    if (!type.empty())
      check_options(entry, at, layer_schema(type), {"name", "type", "inputs"}, type, o, problems);
    if (type == "linear" || type == "conv2d") {
      if (o["weight_init"].IsDefined() && o["weight_init"].as<std::string>() == "normal" &&
          !o["init_std"].IsDefined())
        o["init_std"] = 0.01;
    }
    out.push_back(o);
  }
  for (size_t i = 0; i + 1 < names.size(); ++i)
    if (!names[i].empty() && read.count(names[i]) == 0)
      problem(
          problems, fmt::format("{}[{}].name", path, i),
          "layer '" + names[i] + "' is not read by any layer (only the last layer is the output)",
          layers[i]);
  return out;
}

YAML::Node check_model_spec(const YAML::Node& model, std::vector<std::string>& problems) {
  YAML::Node out(YAML::NodeType::Map);
  if (!model.IsDefined() || model.IsNull()) {
    problems.push_back("model: missing (give a zoo `name` or a `layers:` list)");
    return out;
  }
  if (!model.IsMap()) {
    problem(problems, "model", "must be a map with a zoo `name` or a `layers:` list", model);
    return out;
  }
  const YAML::Node name = model["name"], layers = model["layers"];
  const bool has_name = name.IsDefined() && !name.IsNull();
  const bool has_layers = layers.IsDefined() && !layers.IsNull();
  if (has_name && has_layers) {
    problem(problems, "model",
            "give either `name` (a zoo model) or `layers` (a custom graph), not both", model);
    return out;
  }
  if (has_layers) {
    check_options(model, "model", {}, {"layers"}, "a custom `layers:` model", out, problems);
    out["layers"] = check_layer_list(layers, "model.layers", problems);
    return out;
  }
  if (!has_name) {
    problem(problems, "model", "needs `name` (one of: " + join(zoo_names()) + ") or `layers`",
            model);
    return out;
  }
  std::string zoo;
  const auto known = zoo_names();
  if (!scalar_as(name, zoo) || std::find(known.begin(), known.end(), zoo) == known.end()) {
    problem(problems, "model.name",
            "unknown model '" + (zoo.empty() ? YAML::Dump(name) : zoo) +
                "' (known: " + join(known) + "; or give a `layers:` list)",
            name);
    return out;
  }
  out["name"] = zoo;
  check_zoo_options(zoo, model, out, problems);
  return out;
}

void throw_if_problems(const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string text;
  for (const auto& p : problems) text += (text.empty() ? "" : "\n") + p;
  throw InputError(text);
}

}  // namespace dtrain
