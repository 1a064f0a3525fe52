// A checked `layers:` list → Graph nodes: each entry's options are read with its layer type's
// schema (layer_table.h) into its options struct, and the type's factory builds the layer.
// Every value here was validated by check_layer_list.
#include "core/error.h"      // DTRAIN_CHECK
#include "nn/layer_table.h"  // find_layer_type
#include "nn/spec.h"

namespace dtrain {

std::vector<GraphNode> make_nodes(const YAML::Node& layers, int64_t classes) {
  std::vector<GraphNode> nodes;
  for (const YAML::Node& e : layers) {
    GraphNode node;
    node.name = e["name"].as<std::string>();
    const auto type = e["type"].as<std::string>();
    const LayerEntry* entry = find_layer_type(type);
    DTRAIN_CHECK(entry != nullptr) << "unchecked layer type '" << type << "'";
    node.layer = entry->make(config::read_resolved(*entry->options, e));
    DTRAIN_CHECK(node.layer->type() == type)
        << "the row of '" << type << "' builds a '" << node.layer->type() << "' layer";
    if (classes > 0) node.layer->set_dataset_classes(classes);
    if (e["block"]) node.block = e["block"].as<std::string>();
    if (e["inputs"])
      for (const YAML::Node& in : e["inputs"]) node.inputs.push_back(in.as<std::string>());
    nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace dtrain
