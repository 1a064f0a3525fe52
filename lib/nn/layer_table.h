// The layer table: one row per layer type of a `layers:` list — its name, a one-line summary,
// its options (a declarative schema over its own options struct, each default the struct
// member's initialiser), its factory, how many inputs it reads and its precision under
// mixed precision. The spec reader (spec.cpp),
// the builder (builder.cpp), `dtrain keys`, `--help` and the key reference (docs/configuration.md)
// all take the layers from here. Adding a layer is its file in lib/nn/layers/ (the class, its
// options struct and schema, and its `..._layer()` row), its backend ops, and one line in
// layer_table.cpp.
#pragma once
#include <any>         // the row's options struct, type-erased
#include <functional>  // LayerEntry::make
#include <memory>      // unique_ptr, shared_ptr
#include <string>
#include <string_view>
#include <vector>

#include "config/schema.h"  // Schema, AnySchema
#include "nn/layer.h"       // Layer

namespace dtrain {

// The dtype a layer computes in when the model trains in bf16 (cluster.precision), after
// PyTorch's autocast op lists; the graph inserts a cast (a reorder) wherever a layer's input
// arrives in another dtype than it reads (nn/graph_precision.cpp).
//   lowers:  bf16: the matrix products (linear, conv2d, attention) and their backward passes,
//            on bf16 inputs with f32 accumulation;
//   follows: its inputs' dtype (element-wise layers, pooling, batch norm; their arithmetic is
//            f32 inside the kernel, only storage is bf16); inputs of mixed dtypes promote to f32;
//   f32:     always f32 (layer norm, embeddings, LRN: reductions over features or tables whose
//            precision the loss feels).
enum class Precision { lowers, follows, f32 };
std::string_view precision_name(Precision p);

struct LayerEntry {
  std::string type;     // `type:` of a `layers:` entry
  std::string summary;  // one line: what it computes
  // Its keys besides name, type and inputs (read into its options struct).
  std::shared_ptr<const config::AnySchema> options;
  std::function<std::unique_ptr<Layer>(const std::any& options)> make;
  size_t inputs = 1;  // how many `inputs` it reads
  Precision precision = Precision::f32;
};

// Every layer type, in the order of the documentation and the messages.
const std::vector<LayerEntry>& layer_types();
// Null when no layer type has that name.
const LayerEntry* find_layer_type(const std::string& type);
std::vector<std::string> layer_type_names();

// A row over the options struct `Options`: `make(const Options&)` builds the layer.
template <class Options, class Make>
LayerEntry layer_row(std::string type, std::string summary, config::Schema<Options> options,
                     Make make, size_t inputs = 1) {
  return {std::move(type), std::move(summary), config::erase(std::move(options)),
          [make](const std::any& o) { return make(std::any_cast<const Options&>(o)); }, inputs};
}
// A row of a layer without options: `make()` builds it.
struct NoOptions {};
template <class Make>
LayerEntry layer_row(std::string type, std::string summary, Make make, size_t inputs = 1) {
  config::Schema<NoOptions> none(type);
  return layer_row(
      std::move(type), std::move(summary), std::move(none),
      [make](const NoOptions&) { return make(); }, inputs);
}

// For `dtrain --help` and `dtrain keys`: each layer type with its summary.
std::string layers_help();
std::string layers_markdown();

}  // namespace dtrain
