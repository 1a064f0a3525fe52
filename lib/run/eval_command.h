// `dtrain eval --config FILE --weights W`: the config's model with the weights of a file
// (a run's model.safetensors), evaluated on the config's test split on this process alone —
// whatever algorithm trained it, a pipeline's gathered stages included. Writes nothing.
#pragma once
#include <cstdint>
#include <string>

#include "run/config.h"  // ExperimentConfig

namespace dtrain {

struct EvalReport {
  double loss = 0, acc = 0;
  int64_t samples = 0;
};

// InputError (exit 2) naming --weights, the file and the first tensor at fault when the file is
// missing, is not safetensors, or does not hold exactly this model's weights and shapes.
EvalReport evaluate_weights(const ExperimentConfig& config, const std::string& weights);
// "test loss 0.412345 acc 0.851200 (10000 samples)": what `dtrain eval` prints, to the
// digits of accuracy.csv.
std::string eval_line(const EvalReport& report);

}  // namespace dtrain
