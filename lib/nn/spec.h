// The `model:` section as data: validation of zoo options and `layers:` entries (spec.cpp),
// the zoo that expands a name + options into a `layers:` list (zoo.cpp, zoo_resnet.cpp), and
// the builder that turns a checked list into Graph nodes (builder.cpp).
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node

#include <string>
#include <vector>

#include "config/reader.h"  // Section: the `model:` map of a config being read
#include "config/schema.h"  // KeyDoc: the model keys' reference
#include "nn/graph.h"       // GraphNode
#include "nn/model.h"       // ModelInput

namespace dtrain {

// The layer types a `layers:` entry may name.
const std::vector<std::string>& layer_type_names();

// Checks the `model:` key of `top` (a config being read): a zoo `name` and its options, or a
// `layers:` list. Problems go to the section's Reader (unknown keys when it reports them);
// returns the completed copy, every default filled in.
YAML::Node check_model_section(config::Section& top);
// Checks a `layers:` list (reported as "model.layers[i]...") and returns the completed copy.
YAML::Node check_layer_list(const YAML::Node& layers, std::vector<std::string>& problems);
// The model keys for the reference: each zoo model's options and each layer type's.
std::vector<config::KeyDoc> model_reference();

// The `layers:` list of a checked zoo spec for this input.
YAML::Node zoo_layers(const YAML::Node& model, const ModelInput& input);
YAML::Node resnet_layers(const std::string& name, const YAML::Node& model, const ModelInput& input);

// Graph nodes from a checked `layers:` list.
std::vector<GraphNode> make_nodes(const YAML::Node& layers);

// Throws InputError listing the problems, if any.
void throw_if_problems(const std::vector<std::string>& problems);

}  // namespace dtrain
