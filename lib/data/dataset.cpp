#include "data/dataset.h"

#include <filesystem>  // exists, is_directory

#include "core/error.h"          // DTRAIN_INPUT_CHECK
#include "core/rng.h"            // random_bits: a stand-in's tokens
#include "data/cifar.h"          // open_cifar
#include "data/idx.h"            // open_idx
#include "data/imagefolder.h"    // open_imagefolder
#include "data/synthetic.h"      // open_synthetic
#include "data/text.h"           // open_text, training_tokens
#include "data/token_file.h"     // open_token_files
#include "data/token_windows.h"  // TokenWindows: a stand-in of token windows

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
  Shape label_shape() const override { return data_->label_shape(); }
  void load_sample(int64_t index, float* out, int32_t* labels, int64_t epoch) const override {
    data_->load_sample(index, out, labels, epoch);
  }
  std::string describe() const override { return description_; }

 private:
  std::unique_ptr<Dataset> data_;
  std::string description_;
};

// Token windows of uniformly random ids, a pure function of (seed, split, position).
class RandomTokenWindows final : public TokenWindows {
 public:
  RandomTokenWindows(int64_t windows, int64_t block_size, int64_t vocab, Split split, uint64_t seed,
                     std::string description)
      : TokenWindows(windows, block_size, vocab, std::move(description)),
        vocab_(static_cast<uint64_t>(vocab)),
        stream_(stream_id(RngStream::synthetic_data, 8 + static_cast<uint64_t>(split))),
        seed_(seed) {}

 protected:
  void read(int64_t first, int64_t count, int32_t* ids) const override {
    for (int64_t i = 0; i < count; ++i)
      ids[i] = static_cast<int32_t>(random_bits(seed_, stream_, first + i) % vocab_);
  }

 private:
  uint64_t vocab_, stream_, seed_;
};

// Sizes of the stand-ins' token streams: the King James Bible as scripts/setup.sh writes it
// (ASCII: as many chars as bytes) and nanoGPT's OpenWebText in GPT-2 tokens.
constexpr int64_t kBibleTokens = 4137850;
constexpr int64_t kOpenWebTextTrain = 9035582198, kOpenWebTextVal = 4434897;

std::unique_ptr<Dataset> token_stand_in(const DatasetOptions& options, Split split) {
  check_block_size(options);
  const bool text = options.name == "text";
  if (text) check_valid_fraction(options.valid_fraction);
  const int64_t train =
      text ? training_tokens(kBibleTokens, options.valid_fraction) : kOpenWebTextTrain;
  const int64_t tokens = split == Split::train ? train
                         : text                ? kBibleTokens - train
                                               : kOpenWebTextVal;
  int64_t windows = window_count(tokens, options.block_size);
  const int64_t requested = split == Split::train ? options.train_size : options.test_size;
  if (requested > 0) windows = requested;
  const int64_t vocab = text ? 256 : options.vocab_size;
  const std::string what =
      text ? std::string("sized as the King James Bible, ") +
                 (options.tokenizer == "char"
                      ? "256 ids: a guess, the char tokenizer's vocabulary comes from the file"
                      : "256 byte ids")
           : "sized as OpenWebText, " + std::to_string(vocab) + " ids";
  std::string description = options.name + " " + std::string(split_name(split)) +
                            ": STAND-IN, no " + (text ? "file" : "files") + " at '" + options.path +
                            "': " + std::to_string(windows) + " windows of random ids, [" +
                            std::to_string(options.block_size) + "] (" + what + ")";
  return std::make_unique<RandomTokenWindows>(windows, options.block_size, vocab, split,
                                              options.seed, std::move(description));
}

}  // namespace

bool dataset_files_missing(const DatasetOptions& options) {
  if (options.name == "synthetic") return false;
  std::error_code ec;
  if (options.path.empty() || !std::filesystem::exists(options.path, ec)) return true;
  if (options.name == "text") return false;  // a file: open_text judges it
  return std::filesystem::is_directory(options.path, ec) &&
         std::filesystem::is_empty(options.path, ec);
}

std::unique_ptr<Dataset> open_stand_in(const DatasetOptions& options, Split split) {
  if (options.name == "text" || options.name == "tokens") return token_stand_in(options, split);
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
  if (name == "text") return open_text(options, split);  // a file, not a folder
  const bool known = name == "mnist" || name == "fashion_mnist" || name == "cifar10" ||
                     name == "cifar100" || name == "imagefolder" || name == "tokens";
  DTRAIN_INPUT_CHECK(known) << "dataset.name: unknown dataset '" << name
                            << "' (expected mnist | fashion_mnist | cifar10 | cifar100 | "
                               "imagefolder | synthetic | text | tokens)";
  DTRAIN_INPUT_CHECK(!options.path.empty()) << "dataset.path: required for " << name;
  DTRAIN_INPUT_CHECK(std::filesystem::exists(options.path))
      << "dataset.path: " << options.path << " does not exist (datasets/README.md says how to "
      << "obtain " << name << ")";
  DTRAIN_INPUT_CHECK(std::filesystem::is_directory(options.path))
      << "dataset.path: " << options.path << " is not a folder";
  if (name == "mnist" || name == "fashion_mnist") return open_idx(options, split);
  if (name == "cifar10" || name == "cifar100") return open_cifar(options, split);
  if (name == "tokens") return open_token_files(options, split);
  return open_imagefolder(options, split);
}

}  // namespace dtrain
