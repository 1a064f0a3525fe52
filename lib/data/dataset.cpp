#include "data/dataset.h"

#include <filesystem>  // exists, is_directory

#include "core/error.h"        // DTRAIN_INPUT_CHECK
#include "data/cifar.h"        // open_cifar
#include "data/idx.h"          // open_idx
#include "data/imagefolder.h"  // open_imagefolder
#include "data/synthetic.h"    // open_synthetic

namespace dtrain {

namespace {

// A synthetic dataset that says what it stands in for.
class StandIn final : public Dataset {
 public:
  StandIn(std::unique_ptr<Dataset> data, std::string description)
      : data_(std::move(data)), description_(std::move(description)) {}
  int64_t size() const override { return data_->size(); }
  Shape sample_shape() const override { return data_->sample_shape(); }
  int64_t num_classes() const override { return data_->num_classes(); }
  int32_t load(int64_t index, float* out, int64_t epoch) const override {
    return data_->load(index, out, epoch);
  }
  std::string describe() const override { return description_; }

 private:
  std::unique_ptr<Dataset> data_;
  std::string description_;
};

}  // namespace

bool dataset_files_missing(const DatasetOptions& options) {
  if (options.name == "synthetic") return false;
  std::error_code ec;
  if (options.path.empty() || !std::filesystem::exists(options.path, ec)) return true;
  return std::filesystem::is_directory(options.path, ec) &&
         std::filesystem::is_empty(options.path, ec);
}

std::unique_ptr<Dataset> open_stand_in(const DatasetOptions& options, Split split) {
  DatasetOptions synthetic = options;
  synthetic.name = "synthetic";
  int64_t train = 0, test = 0;  // the real splits' sizes
  const std::string& name = options.name;
  if (name == "mnist" || name == "fashion_mnist") {
    synthetic.shape = {1, 28, 28}, synthetic.classes = 10, train = 60000, test = 10000;
  } else if (name == "cifar10" || name == "cifar100") {
    synthetic.shape = {3, 32, 32}, synthetic.classes = name == "cifar10" ? 10 : 100;
    train = 50000, test = 10000;
  } else if (name == "imagefolder") {
    synthetic.shape = {3, options.image_size, options.image_size}, synthetic.classes = 1000;
    train = 1281167, test = 50000;
  } else {
    DTRAIN_INPUT_CHECK(false) << "dataset.name: no stand-in for '" << name << "'";
  }
  if (synthetic.train_size == 0) synthetic.train_size = train;
  if (synthetic.test_size == 0) synthetic.test_size = test;
  auto data = open_synthetic(synthetic, split);
  std::string description =
      std::string(name) + " " + std::string(split_name(split)) + ": STAND-IN, no files at '" +
      options.path + "': " + std::to_string(data->size()) + " synthetic samples of " +
      data->sample_shape().str() + ", " + std::to_string(data->num_classes()) + " classes" +
      (name == "imagefolder" ? " (as ImageNet)" : "");
  return std::make_unique<StandIn>(std::move(data), std::move(description));
}

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
      << "dataset.path: " << options.path << " does not exist (datasets/README.md says how to "
      << "obtain " << name << ")";
  DTRAIN_INPUT_CHECK(std::filesystem::is_directory(options.path))
      << "dataset.path: " << options.path << " is not a folder";
  if (name == "mnist" || name == "fashion_mnist") return open_idx(options, split);
  if (name == "cifar10" || name == "cifar100") return open_cifar(options, split);
  return open_imagefolder(options, split);
}

}  // namespace dtrain
