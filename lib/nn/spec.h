// The `model:` section as data: validation of zoo options and `layers:` entries (spec.cpp),
// the zoo that expands a name + options into a `layers:` list (zoo_table.cpp, zoo.cpp,
// zoo_resnet.cpp), and the builder that turns a checked list into Graph nodes (builder.cpp).
// The zoo models and the layer types, with their options, are tables (zoo_table.h,
// layer_table.h).
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node

#include <string>
#include <vector>

#include "config/reader.h"   // Section: the `model:` map of a config being read
#include "config/schema.h"   // KeyDoc: the model keys' reference
#include "nn/graph.h"        // GraphNode
#include "nn/model_input.h"  // ModelInput

namespace dtrain {

// Checks the `model:` key of `top` (a config being read): a zoo `name` and its options, or a
// `layers:` list. Problems go to the section's Reader (unknown keys when it reports them);
// returns the completed copy, every default filled in.
YAML::Node check_model_section(config::Section& top);
// Checks a `layers:` list (reported as "model.layers[i]...") and returns the completed copy.
YAML::Node check_layer_list(const YAML::Node& layers, std::vector<std::string>& problems);
// The model keys for the reference: each zoo model's options and each layer type's.
std::vector<config::KeyDoc> model_reference();
// For `dtrain --help`: each zoo model with its options and defaults, and each layer type.
std::string model_help();
// For `dtrain keys`: Markdown tables of the zoo models and the layer types.
std::string model_markdown();

// The `layers:` list of a checked zoo spec for this input.
YAML::Node zoo_layers(const YAML::Node& model, const ModelInput& input);

// Graph nodes from a checked `layers:` list; `classes`, when known, is the dataset's class
// count (a vocabulary), the default size of layers that take it (embedding).
std::vector<GraphNode> make_nodes(const YAML::Node& layers, int64_t classes = 0);

// Throws InputError listing the problems, if any.
void throw_if_problems(const std::vector<std::string>& problems);

}  // namespace dtrain
