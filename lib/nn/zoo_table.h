// The model zoo's table: one row per model — its name, a one-line summary, its options (a
// declarative schema over its own options struct) and the function that writes its `layers:`
// list, the list a user could have given, so that the zoo and custom graphs share one reader
// and one builder. The spec reader (spec.cpp), `dtrain keys`, `--help` and the key reference take
// the models from here. Adding a model is its options struct, schema, list function and
// `..._model()` row (zoo.cpp, zoo_resnet.cpp or a file of its own), and one line in
// zoo_table.cpp.
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node: the layer list

#include <any>         // the row's options struct, type-erased
#include <functional>  // ZooEntry::layers
#include <memory>      // shared_ptr
#include <string>
#include <vector>

#include "config/schema.h"   // Schema, AnySchema
#include "nn/model_input.h"  // ModelInput

namespace dtrain {

struct ZooEntry {
  std::string name;     // model.name
  std::string summary;  // one line: what it is, and its paper
  // Its keys besides `name` (read into its options struct).
  std::shared_ptr<const config::AnySchema> options;
  // The model as {layers: [...]} for this input (a checked `layers:` list follows from it).
  std::function<YAML::Node(const std::any& options, const ModelInput& input)> layers;
  bool image_input = true;      // needs [channels, height, width] samples
  bool sequence_input = false;  // needs sequences of token ids [T] (a language model)
  // Its list marks blocks (`block:` on its entries) that model.recompute: blocks recomputes.
  bool blocks = false;
};

// Every zoo model, in the order of the documentation and the messages.
const std::vector<ZooEntry>& zoo_models();
// Null when no zoo model has that name.
const ZooEntry* find_zoo_model(const std::string& name);

// A row over the options struct `Options`: `layers(const Options&, const ModelInput&)` writes
// the model's list.
template <class Options, class Layers>
ZooEntry zoo_row(std::string name, std::string summary, config::Schema<Options> options,
                 Layers layers, bool image_input = true) {
  return {std::move(name), std::move(summary), config::erase(std::move(options)),
          [layers](const std::any& o, const ModelInput& input) {
            return layers(std::any_cast<const Options&>(o), input);
          },
          image_input};
}

// For `dtrain --help` (each model with its options and defaults) and `dtrain keys`.
std::string zoo_help();
std::string zoo_markdown();

}  // namespace dtrain
