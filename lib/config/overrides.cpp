// --set KEY=VALUE: parse, then graft onto the YAML tree (see config_overrides.h).
#include "config/overrides.h"

#include <fmt/format.h>  // fmt::format: messages, normalised paths

#include "config/reader.h"  // parse_path, PathStep
#include "core/error.h"     // InputError, DTRAIN_INPUT_CHECK

namespace dtrain::config {

namespace {

// A copy without file positions: a value parsed from the command line has line "1", which would
// point users at the first line of their file.
YAML::Node positionless_copy(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return YAML::Node(node.Scalar());
    case YAML::NodeType::Sequence: {
      YAML::Node copy(YAML::NodeType::Sequence);
      for (const auto& item : node) copy.push_back(positionless_copy(item));
      copy.SetStyle(node.Style());
      return copy;
    }
    case YAML::NodeType::Map: {
      YAML::Node copy(YAML::NodeType::Map);
      for (auto it = node.begin(); it != node.end(); ++it)
        copy[positionless_copy(it->first)] = positionless_copy(it->second);
      copy.SetStyle(node.Style());
      return copy;
    }
    default:
      return YAML::Node(YAML::NodeType::Null);
  }
}

// Writes `value` at steps[i..] below `parent` (a map or list, as steps[i] requires).
void place(YAML::Node parent, const std::vector<PathStep>& steps, size_t i, const YAML::Node& value,
           const std::string& item) {
  const PathStep& step = steps[i];
  bool last = i + 1 == steps.size();
  bool next_is_index = !last && steps[i + 1].index >= 0;
  YAML::Node child(YAML::NodeType::Undefined);
  if (step.index >= 0) {
    DTRAIN_INPUT_CHECK(parent.IsSequence() && static_cast<size_t>(step.index) < parent.size())
        << "--set " << item << ": no element [" << step.index << "] to replace (the list has "
        << (parent.IsSequence() ? parent.size() : 0) << ")";
    if (last) {
      parent[static_cast<size_t>(step.index)] = value;
      return;
    }
    child.reset(parent[static_cast<size_t>(step.index)]);
  } else {
    if (last) {
      parent[step.key] = value;
      return;
    }
    for (auto it = parent.begin(); it != parent.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == step.key) {
        child.reset(it->second);
        break;
      }
  }
  if (next_is_index) {
    DTRAIN_INPUT_CHECK(child.IsDefined() && child.IsSequence())
        << "--set " << item << ": there is no list to index at '" << step.key << "'";
    place(child, steps, i + 1, value, item);
  } else if (child.IsDefined() && child.IsMap()) {
    place(child, steps, i + 1, value, item);
  } else {
    // Absent, empty or not a map: the override builds the maps it needs (and replaces a scalar).
    YAML::Node fresh(YAML::NodeType::Map);
    place(fresh, steps, i + 1, value, item);
    if (step.index >= 0)
      parent[static_cast<size_t>(step.index)] = fresh;
    else
      parent[step.key] = fresh;
  }
}

std::string normalised(const std::vector<PathStep>& steps) {
  std::string path;
  for (const auto& step : steps)
    path = step.index >= 0 ? element_path(path, step.index) : child_path(path, step.key);
  return path;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> apply_overrides(
    YAML::Node& root, const std::vector<std::string>& items) {
  std::vector<std::pair<std::string, std::string>> written;
  for (const auto& item : items) {
    auto eq = item.find('=');
    DTRAIN_INPUT_CHECK(eq != std::string::npos)
        << "--set " << item << ": expected KEY=VALUE, e.g. --set train.epochs=1";
    std::string key = item.substr(0, eq);
    while (!key.empty() && key.back() == ' ') key.pop_back();
    while (!key.empty() && key.front() == ' ') key.erase(0, 1);
    DTRAIN_INPUT_CHECK(!key.empty()) << "--set " << item << ": the KEY before '=' is empty";
    auto steps = parse_path(key);
    DTRAIN_INPUT_CHECK(steps && (*steps)[0].index < 0)
        << "--set " << item << ": '" << key
        << "' is not a dotted key path (e.g. optimizer.lr or model.hidden[0])";

    YAML::Node value;
    try {
      value = positionless_copy(YAML::Load(item.substr(eq + 1)));
    } catch (const YAML::Exception& e) {
      throw InputError(fmt::format("--set {}: the value is not valid YAML: {}", item, e.msg));
    }
    place(root, *steps, 0, value, item);
    written.emplace_back(normalised(*steps), item);
  }
  return written;
}

}  // namespace dtrain::config
