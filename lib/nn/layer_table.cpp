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

namespace {
LayerEntry under_bf16(LayerEntry row, Precision precision) {
  row.precision = precision;
  return row;
}
}  // namespace

// One row per line, in the order of the documentation and the messages, with its precision.
// clang-format off
const std::vector<LayerEntry>& layer_types() {
  static const std::vector<LayerEntry> table{
      under_bf16(linear_layer(),             Precision::lowers),
      under_bf16(conv2d_layer(),             Precision::lowers),
      under_bf16(maxpool2d_layer(),          Precision::follows),
      under_bf16(avgpool2d_layer(),          Precision::follows),
      under_bf16(global_avgpool_layer(),     Precision::follows),
      under_bf16(relu_layer(),               Precision::follows),
      under_bf16(gelu_layer(),               Precision::follows),
      under_bf16(lrn_layer(),                Precision::f32),
      under_bf16(dropout_layer(),            Precision::follows),
      under_bf16(batchnorm2d_layer(),        Precision::follows),
      under_bf16(flatten_layer(),            Precision::follows),
      under_bf16(add_layer(),                Precision::follows),
      under_bf16(channel_pad_layer(),        Precision::follows),
      under_bf16(embedding_layer(),          Precision::f32),
      under_bf16(position_embedding_layer(), Precision::f32),
      under_bf16(layer_norm_layer(),         Precision::f32),
      under_bf16(attention_layer(),          Precision::lowers),
  };
  return table;
}
// clang-format on

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::lowers:
      return "bf16";
    case Precision::follows:
      return "its input's";
    case Precision::f32:
      return "f32";
  }
  return "?";
}

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
  std::string md =
      "| model.layers[].type | inputs | under bf16 | what it is |\n| --- | --- | --- | --- |\n";
  for (const LayerEntry& l : layer_types())
    md += fmt::format("| `{}` | {} | {} | {} |\n", l.type, l.inputs, precision_name(l.precision),
                      l.summary);
  return md;
}

}  // namespace dtrain
