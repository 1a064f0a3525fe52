// Applying --set KEY=VALUE items to the experiment's YAML tree.
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node: the tree being edited

#include <string>
#include <utility>  // std::pair
#include <vector>

namespace dtrain::config {

// Parses each item's VALUE as YAML and places it at the dotted KEY path of `root` (a map),
// creating maps along the way, before any validation, so that an override goes through exactly
// the checks a file value does. The placed values carry no file position, which is how their
// problems are told apart. Returns, per item, the normalised path written and the item text.
// A malformed item (no '=', empty or malformed key, VALUE not YAML, index past a list's end) is
// an InputError.
std::vector<std::pair<std::string, std::string>> apply_overrides(
    YAML::Node& root, const std::vector<std::string>& items);

}  // namespace dtrain::config
