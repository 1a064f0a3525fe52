#include "data/dataset.h"

#include <filesystem>  // exists, is_directory

#include "core/error.h"        // DTRAIN_INPUT_CHECK
#include "data/cifar.h"        // open_cifar
#include "data/idx.h"          // open_idx
#include "data/imagefolder.h"  // open_imagefolder
#include "data/synthetic.h"    // open_synthetic

namespace dtrain {

std::unique_ptr<Dataset> open_dataset(const DatasetOptions& options, Split split) {
  const std::string& name = options.name;
  if (name == "synthetic") return open_synthetic(options, split);
  const bool known = name == "mnist" || name == "fashion_mnist" || name == "cifar10" ||
                     name == "cifar100" || name == "imagefolder";
  DTRAIN_INPUT_CHECK(known) << "dataset.name: unknown dataset '" << name
                            << "' (expected mnist | fashion_mnist | cifar10 | cifar100 | "
                               "imagefolder | synthetic)";
  DTRAIN_INPUT_CHECK(!options.path.empty()) << "dataset.path: required for " << name;
  DTRAIN_INPUT_CHECK(std::filesystem::exists(options.path))
      << "dataset.path: " << options.path << " does not exist";
  DTRAIN_INPUT_CHECK(std::filesystem::is_directory(options.path))
      << "dataset.path: " << options.path << " is not a folder";
  if (name == "mnist" || name == "fashion_mnist") return open_idx(options, split);
  if (name == "cifar10" || name == "cifar100") return open_cifar(options, split);
  return open_imagefolder(options, split);
}

}  // namespace dtrain
