// The layer table and what is derived from it (see layer_table.h).
#include "nn/layer_table.h"

#include <fmt/format.h>  // fmt::format

#include "core/named_rows.h"  // find_row, row_names

namespace dtrain {

// Each layer's file (lib/nn/layers/) defines its row.
LayerEntry linear_layer();
LayerEntry conv2d_layer();
LayerEntry maxpool2d_layer();
LayerEntry avgpool2d_layer();
LayerEntry global_avgpool_layer();
LayerEntry relu_layer();
LayerEntry gelu_layer();
LayerEntry lrn_layer();
LayerEntry dropout_layer();
LayerEntry batchnorm2d_layer();
LayerEntry flatten_layer();
LayerEntry add_layer();
LayerEntry channel_pad_layer();
LayerEntry embedding_layer();
LayerEntry position_embedding_layer();
LayerEntry layer_norm_layer();
LayerEntry attention_layer();

// One row per line, in the order of the documentation and the messages.
// clang-format off
const std::vector<LayerEntry>& layer_types() {
  static const std::vector<LayerEntry> table{
      linear_layer(),
      conv2d_layer(),
      maxpool2d_layer(),
      avgpool2d_layer(),
      global_avgpool_layer(),
      relu_layer(),
      gelu_layer(),
      lrn_layer(),
      dropout_layer(),
      batchnorm2d_layer(),
      flatten_layer(),
      add_layer(),
      channel_pad_layer(),
      embedding_layer(),
      position_embedding_layer(),
      layer_norm_layer(),
      attention_layer(),
  };
  return table;
}
// clang-format on

const LayerEntry* find_layer_type(const std::string& type) {
  return find_row(layer_types(), &LayerEntry::type, type);
}

std::vector<std::string> layer_type_names() {
  return row_names(layer_types(), &LayerEntry::type);
}

namespace {
std::string inputs_note(const LayerEntry& l) {
  return l.inputs == 1 ? "" : fmt::format("({} inputs) ", l.inputs);
}
}  // namespace

std::string layers_help() {
  std::string text =
      "Layer types of a custom model (model.layers[].type; their keys: dtrain keys):\n";
  for (const LayerEntry& l : layer_types())
    text += fmt::format("  {:<15} {}{}\n", l.type, inputs_note(l), l.summary);
  return text;
}

std::string layers_markdown() {
  std::string md = "| model.layers[].type | inputs | what it is |\n| --- | --- | --- |\n";
  for (const LayerEntry& l : layer_types())
    md += fmt::format("| `{}` | {} | {} |\n", l.type, l.inputs, l.summary);
  return md;
}

}  // namespace dtrain
