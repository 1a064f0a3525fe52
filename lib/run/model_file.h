// model.safetensors, beside accuracy.csv: the weights of the model a run evaluated last, in
// the safetensors format (nn/safetensors.h) that PyTorch loads and that model.init_from and
// `dtrain eval` read back.
#pragma once
#include <string>

#include "nn/safetensors.h"   // TensorMetadata
#include "run/config.h"       // ExperimentConfig
#include "sched/scheduler.h"  // Scheduler::weights

namespace dtrain {

inline constexpr const char* kModelFileName = "model.safetensors";

// What the file's __metadata__ says of the run: dtrain's version and commit, the experiment's
// name and the model (a zoo name, or "layers" for a custom graph), and PyTorch's "format".
TensorMetadata model_file_metadata(const ExperimentConfig& config);
// A collective: the scheduler's weights (Scheduler::weights: the model evaluate() evaluates,
// gathered from a pipeline's stages) written atomically by rank 0 into
// output.dir/model.safetensors.
void write_model_file(Scheduler& scheduler, const ExperimentConfig& config, int rank);

}  // namespace dtrain
