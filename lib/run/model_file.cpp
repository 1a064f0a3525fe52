#include "run/model_file.h"

#include "run/run_record.h"  // dtrain_version, dtrain_commit

namespace dtrain {

TensorMetadata model_file_metadata(const ExperimentConfig& config) {
  const YAML::Node name = config.model["name"];
  return {{"format", "pt"},  // what safetensors.torch writes: tensors in PyTorch's layouts
          {"dtrain_version", dtrain_version()},
          {"dtrain_commit", dtrain_commit()},
          {"experiment", config.name},
          {"model", name.IsDefined() ? name.as<std::string>() : "layers"}};
}

void write_model_file(Scheduler& scheduler, const ExperimentConfig& config, int rank) {
  const NamedTensors weights = scheduler.weights();
  if (rank == 0)
    write_safetensors(config.output.dir + "/" + kModelFileName, weights,
                      model_file_metadata(config));
}

}  // namespace dtrain
