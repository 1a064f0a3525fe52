#include "data/stand_in.h"

#include "core/error.h"          // DTRAIN_INPUT_CHECK
#include "core/rng.h"            // random_bits: a stand-in's tokens
#include "data/normalize.h"      // resolve_normalization, Normalization::identity
#include "data/synthetic.h"      // generate_images
#include "data/token_windows.h"  // TokenWindows, window_count

namespace dtrain {

namespace {

// Generated data that says what it stands in for.
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

std::string stand_in_head(const DatasetConfig& config, Split split, std::string_view missing) {
  return config.name + " " + std::string(split_name(split)) + ": STAND-IN, no " +
         std::string(missing) + " at '" + config.path + "': ";
}

}  // namespace

std::unique_ptr<Dataset> stand_in_images(const DatasetConfig& config, Split split, uint64_t seed,
                                         const RealImages& real) {
  const char* key = split == Split::train ? "dataset.train_size" : "dataset.test_size";
  int64_t size = split == Split::train ? config.train_size : config.test_size;
  DTRAIN_INPUT_CHECK(size >= 0) << key << ": " << size << " is negative";
  if (size == 0) size = split == Split::train ? real.train : real.test;
  const int64_t channels = real.shape[0];
  auto data =
      generate_images(real.shape, real.classes, size, split, seed,
                      resolve_normalization(config, channels, Normalization::identity(channels)));
  std::string description = stand_in_head(config, split, "files") + std::to_string(data->size()) +
                            " synthetic samples of " + data->sample_shape().str() + ", " +
                            std::to_string(data->num_classes()) + " classes" + real.resembles;
  return std::make_unique<StandIn>(std::move(data), std::move(description));
}

std::unique_ptr<Dataset> stand_in_tokens(const DatasetConfig& config, Split split, uint64_t seed,
                                         int64_t block_size, int64_t tokens, int64_t vocab,
                                         std::string_view missing, std::string_view what) {
  int64_t windows = window_count(tokens, block_size);
  const int64_t requested = split == Split::train ? config.train_size : config.test_size;
  if (requested > 0) windows = requested;
  std::string description = stand_in_head(config, split, missing) + std::to_string(windows) +
                            " windows of random ids, [" + std::to_string(block_size) + "] (" +
                            std::string(what) + ")";
  return std::make_unique<RandomTokenWindows>(windows, block_size, vocab, split, seed,
                                              std::move(description));
}

}  // namespace dtrain
