// The standard initialisations, as PyTorch / torchvision compute them, and their keys' kinds.
#include <cmath>  // sqrt

#include "nn/layers/layers.h"

namespace dtrain {

config::Kind<WeightInit> weight_init_kind() {
  return config::enum_choice<WeightInit>(
      {{"pytorch", WeightInit::pytorch},
       {"kaiming_normal_fan_out", WeightInit::kaiming_normal_fan_out},
       {"kaiming_normal_fan_in", WeightInit::kaiming_normal_fan_in},
       {"normal", WeightInit::normal}});
}

config::Kind<BiasInit> bias_init_kind() {
  return config::enum_choice<BiasInit>({{"pytorch", BiasInit::pytorch}, {"zero", BiasInit::zero}});
}

ParamInit weight_init(const InitOptions& init, int64_t fan_in, int64_t fan_out) {
  switch (init.weight_init) {
    case WeightInit::pytorch:
      // kaiming_uniform_(a=√5): gain √(2/(1+5)), bound gain·√(3/fan_in) = 1/√fan_in.
      return {ParamInit::Kind::uniform, 1.0f / std::sqrt(static_cast<float>(fan_in))};
    case WeightInit::kaiming_normal_fan_out:  // kaiming_normal_(mode="fan_out", "relu")
      return {ParamInit::Kind::normal, std::sqrt(2.0f / static_cast<float>(fan_out))};
    case WeightInit::kaiming_normal_fan_in:  // kaiming_normal_(mode="fan_in", "relu")
      return {ParamInit::Kind::normal, std::sqrt(2.0f / static_cast<float>(fan_in))};
    case WeightInit::normal:
      return {ParamInit::Kind::normal, static_cast<float>(init.init_std)};
  }
  return {};
}

ParamInit bias_init(const InitOptions& init, int64_t fan_in) {
  if (init.bias_init == BiasInit::zero) return {ParamInit::Kind::constant, 0.0f};
  return {ParamInit::Kind::uniform, 1.0f / std::sqrt(static_cast<float>(fan_in))};
}

}  // namespace dtrain
