// What the layer files share: the header every layer includes (Layer, its table row, the schema
// of its options), the weight and bias initialisations of the layers with weights, and the
// factories of the parameterless layers that tests wire into graphs by hand. Each layer lives in
// its own file with its options struct, their schema and its row of the layer table.
#pragma once
#include <memory>  // unique_ptr

#include "backend/ops.h"     // op specs
#include "config/schema.h"   // Schema and the kinds: each layer's options
#include "nn/layer.h"        // Layer
#include "nn/layer_table.h"  // LayerEntry, layer_row

namespace dtrain {

// How a weight tensor is initialised. `pytorch` is PyTorch's default for Linear and Conv2d,
// kaiming_uniform(a=√5), i.e. U(±1/√fan_in); the reference models override it (torchvision
// ResNet/VGG convolutions: kaiming_normal fan_out; VGG linear: N(0, 0.01²)).
enum class WeightInit { pytorch, kaiming_normal_fan_out, kaiming_normal_fan_in, normal };
// `pytorch`: U(±1/√fan_in) as nn.Linear / nn.Conv2d; `zero`: as torchvision VGG.
enum class BiasInit { pytorch, zero };

// The initialisation options of a layer with weights; its options struct derives from this.
struct InitOptions {
  WeightInit weight_init = WeightInit::pytorch;
  double init_std = 0.01;  // WeightInit::normal
  BiasInit bias_init = BiasInit::pytorch;
};
config::Kind<WeightInit> weight_init_kind();
config::Kind<BiasInit> bias_init_kind();

// Declares the InitOptions keys on the schema of `Options` (which derives from InitOptions).
template <class Options>
config::Schema<Options>& with_init_keys(config::Schema<Options>& s) {
  return s
      .template key<WeightInit>(
          "weight_init", &Options::weight_init, weight_init_kind(),
          "weight initialisation (PyTorch's default, Kaiming normal, or normal with init_std)")
      .template key<double>("init_std", &Options::init_std, config::real(config::Bounds::above(0)),
                            "standard deviation for weight_init normal")
      .written_if([](const Options& o) { return o.weight_init == WeightInit::normal; },
                  "with weight_init normal")
      .template key<BiasInit>("bias_init", &Options::bias_init, bias_init_kind(),
                              "bias initialisation");
}

// Initialisation of a weight with the given fan-in/fan-out (see WeightInit).
ParamInit weight_init(const InitOptions& init, int64_t fan_in, int64_t fan_out);
ParamInit bias_init(const InitOptions& init, int64_t fan_in);

std::unique_ptr<Layer> make_relu();
std::unique_ptr<Layer> make_add();
// Not in the layer table: the graph inserts casts between layers of different dtypes.
std::unique_ptr<Layer> make_cast(DType to);

}  // namespace dtrain
