// LayerList: writes a `layers:` YAML list the way a user would, for the zoo.
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node

#include <string>
#include <vector>

namespace dtrain {

class LayerList {
 public:
  LayerList() : list_(YAML::NodeType::Sequence) {}

  // Appends `type` named `name` (read from `inputs`, or the previous entry when empty) and
  // returns the entry for its options.
  YAML::Node add(const std::string& name, const std::string& type,
                 const std::vector<std::string>& inputs = {}) {
    YAML::Node e(YAML::NodeType::Map);
    e["name"] = name;
    e["type"] = type;
    if (!inputs.empty()) {
      YAML::Node in(YAML::NodeType::Sequence);
      in.SetStyle(YAML::EmitterStyle::Flow);
      for (const auto& s : inputs) in.push_back(s);
      e["inputs"] = in;
    }
    if (!block_.empty()) e["block"] = block_;
    list_.push_back(e);
    last_ = name;
    return e;
  }
  // The entries added from now on belong to block `name` (model.recompute: blocks); "" ends it.
  void block(const std::string& name) { block_ = name; }
  YAML::Node conv(const std::string& name, int64_t out, int64_t kernel, int64_t stride,
                  int64_t padding, bool bias, const std::vector<std::string>& inputs = {}) {
    YAML::Node e = add(name, "conv2d", inputs);
    e["out_channels"] = out;
    e["kernel"] = kernel;
    e["stride"] = stride;
    e["padding"] = padding;
    e["bias"] = bias;
    return e;
  }
  YAML::Node linear(const std::string& name, int64_t out) {
    YAML::Node e = add(name, "linear");
    e["out_features"] = out;
    return e;
  }
  YAML::Node pool(const std::string& name, bool max, int64_t kernel, int64_t stride,
                  int64_t padding = 0, bool ceil_mode = false) {
    YAML::Node e = add(name, max ? "maxpool2d" : "avgpool2d");
    e["kernel"] = kernel;
    e["stride"] = stride;
    e["padding"] = padding;
    e["ceil_mode"] = ceil_mode;
    return e;
  }
  const std::string& last() const { return last_; }
  YAML::Node model() const {
    YAML::Node m(YAML::NodeType::Map);
    m["layers"] = list_;
    return m;
  }

 private:
  YAML::Node list_;
  std::string last_;
  std::string block_;  // of the entries being added, "" for none
};

}  // namespace dtrain
