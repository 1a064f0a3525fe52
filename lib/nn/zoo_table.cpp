// The zoo's table and what is derived from it (see zoo_table.h).
#include "nn/zoo_table.h"

#include <fmt/format.h>  // fmt::format

#include "core/error.h"       // DTRAIN_CHECK, DTRAIN_INPUT_CHECK
#include "core/named_rows.h"  // find_row, row_names
#include "nn/model.h"         // zoo_names: declared with the Model
#include "nn/spec.h"          // zoo_layers

namespace dtrain {

// The classic networks' rows are in zoo.cpp, the ResNets' in zoo_resnet.cpp, the GPTs' in
// zoo_gpt.cpp.
ZooEntry mlp_model();
ZooEntry lenet_model();
ZooEntry cifar_cnn_model();
ZooEntry alexnet_model();
ZooEntry vgg16_model();
ZooEntry resnet18_model();
ZooEntry resnet50_model();
ZooEntry resnet20_model();
ZooEntry gpt_model();
ZooEntry gpt2_model();

// One row per line, in the order of the documentation and the messages.
// clang-format off
const std::vector<ZooEntry>& zoo_models() {
  static const std::vector<ZooEntry> table{
      mlp_model(),
      lenet_model(),
      cifar_cnn_model(),
      alexnet_model(),
      vgg16_model(),
      resnet18_model(),
      resnet50_model(),
      resnet20_model(),
      gpt_model(),
      gpt2_model(),
  };
  return table;
}
// clang-format on

const ZooEntry* find_zoo_model(const std::string& name) {
  return find_row(zoo_models(), &ZooEntry::name, name);
}

std::vector<std::string> zoo_names() {
  return row_names(zoo_models(), &ZooEntry::name);
}

YAML::Node zoo_layers(const YAML::Node& model, const ModelInput& input) {
  const auto name = model["name"].as<std::string>();
  const ZooEntry* zoo = find_zoo_model(name);
  DTRAIN_CHECK(zoo != nullptr) << "unknown zoo model '" << name << "'";
  DTRAIN_INPUT_CHECK(!zoo->image_input || input.sample_shape.rank() == 3)
      << "model '" << name << "' needs [channels, height, width] samples, the dataset gives "
      << input.sample_shape.str();
  DTRAIN_INPUT_CHECK(!zoo->sequence_input || input.sample_shape.rank() == 1)
      << "model '" << name << "' is a language model: it needs sequences of token ids [T] (a "
      << "text or tokens dataset), the dataset gives samples " << input.sample_shape.str();
  return zoo->layers(config::read_resolved(*zoo->options, model), input);
}

std::string zoo_help() {
  std::string text =
      "Models (model.name, with their options and defaults; or a custom `layers:` list):\n";
  for (const ZooEntry& z : zoo_models()) {
    YAML::Node defaults(YAML::NodeType::Map);
    defaults["name"] = z.name;
    const YAML::Node keys = z.options->write(z.options->defaults(), config::Style::file);
    for (auto it = keys.begin(); it != keys.end(); ++it) defaults[it->first] = it->second;
    text += fmt::format("  {}\n      {}\n      model: {}\n", z.name, z.summary,
                        config::one_line(defaults));
  }
  return text;
}

std::string zoo_markdown() {
  std::string md = "| model.name | what it is |\n| --- | --- |\n";
  for (const ZooEntry& z : zoo_models()) md += fmt::format("| `{}` | {} |\n", z.name, z.summary);
  return md;
}

}  // namespace dtrain
