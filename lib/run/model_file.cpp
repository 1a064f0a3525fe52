#include "run/model_file.h"

#include <algorithm>  // min
#include <vector>

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
  scheduler.write_weights([&](const std::vector<TensorSource>& tensors) {
    if (rank == 0) {
      write_safetensors(config.output.dir + "/" + kModelFileName, tensors,
                        model_file_metadata(config));
      return;
    }
    // Weights sharded over the ranks: the others read each part too (which gathers it), into
    // nothing.
    for (const TensorSource& t : tensors)
      for (int64_t begin = 0; begin < t.shape.numel(); begin += kTensorSourcePart)
        t.fill(nullptr, begin, std::min(kTensorSourcePart, t.shape.numel() - begin));
  });
}

}  // namespace dtrain
