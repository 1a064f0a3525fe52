// The `model:` section as data: validation of zoo options and `layers:` entries (spec.cpp),
// the zoo that expands a name + options into a `layers:` list (zoo.cpp, zoo_resnet.cpp), and
// the builder that turns a checked list into Graph nodes (builder.cpp).
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node

#include <string>
#include <vector>

#include "nn/graph.h"  // GraphNode
#include "nn/model.h"  // ModelInput

namespace dtrain {

// The layer types a `layers:` entry may name.
const std::vector<std::string>& layer_type_names();

// Checks one zoo model's options (everything in `model` but `name`) and fills defaults.
void check_zoo_options(const std::string& name, const YAML::Node& model, YAML::Node& out,
                       std::vector<std::string>& problems);
// Checks a `layers:` list (path "model.layers") and returns the completed copy.
YAML::Node check_layer_list(const YAML::Node& layers, const std::string& path,
                            std::vector<std::string>& problems);

// The `layers:` list of a checked zoo spec for this input.
YAML::Node zoo_layers(const YAML::Node& model, const ModelInput& input);
YAML::Node resnet_layers(const std::string& name, const YAML::Node& model, const ModelInput& input);

// Graph nodes from a checked `layers:` list.
std::vector<GraphNode> make_nodes(const YAML::Node& layers);

// Throws InputError listing the problems, if any.
void throw_if_problems(const std::vector<std::string>& problems);

}  // namespace dtrain
