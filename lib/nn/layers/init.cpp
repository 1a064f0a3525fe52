// The standard initialisations, as PyTorch / torchvision compute them.
#include <cmath>  // sqrt

#include "nn/layers/layers.h"

namespace dtrain {

ParamInit weight_init(WeightInit kind, int64_t fan_in, int64_t fan_out, float std) {
  switch (kind) {
    case WeightInit::pytorch:
      // kaiming_uniform_(a=√5): gain √(2/(1+5)), bound gain·√(3/fan_in) = 1/√fan_in.
      return {ParamInit::Kind::uniform, 1.0f / std::sqrt(static_cast<float>(fan_in))};
    case WeightInit::kaiming_normal_fan_out:  // kaiming_normal_(mode="fan_out", "relu")
      return {ParamInit::Kind::normal, std::sqrt(2.0f / static_cast<float>(fan_out))};
    case WeightInit::kaiming_normal_fan_in:  // kaiming_normal_(mode="fan_in", "relu")
      return {ParamInit::Kind::normal, std::sqrt(2.0f / static_cast<float>(fan_in))};
    case WeightInit::normal:
      return {ParamInit::Kind::normal, std};
  }
  return {};
}

ParamInit bias_init(BiasInit kind, int64_t fan_in) {
  if (kind == BiasInit::zero) return {ParamInit::Kind::constant, 0.0f};
  return {ParamInit::Kind::uniform, 1.0f / std::sqrt(static_cast<float>(fan_in))};
}

}  // namespace dtrain
