#include "data/synthetic.h"

#include <algorithm>  // min
#include <vector>

#include "core/error.h"  // DTRAIN_INPUT_CHECK, DTRAIN_CHECK
#include "core/rng.h"    // random_bits, random_uniform: samples as pure functions of the index
#include "data/dataset_table.h"  // DatasetEntry: its row
#include "data/describe.h"       // describe_dataset

namespace dtrain {
namespace {

// Patterns vary over at most kBlocks × kBlocks blocks per channel: distinct enough per class to
// learn, and a table of classes × C × 64 floats even for 1000-class ImageNet-shaped data.
constexpr int64_t kBlocks = 8;
constexpr float kPatternAmplitude = 0.5f;

// Sub-streams of RngStream::synthetic_data.
constexpr uint64_t kPatternStream = 1;  // shared by both splits: the same classes
constexpr uint64_t kLabelStream = 2;    // + split: different samples per split
constexpr uint64_t kNoiseStream = 4;    // + split

// Uniform in [-1, 1) from the low 16 bits.
inline float unit_noise(uint64_t bits) {
  return static_cast<float>(bits & 0xffff) * (2.0f / 65536.0f) - 1.0f;
}

class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(const Shape& shape, int64_t classes, int64_t size, Split split, uint64_t seed,
                   Normalization norm)
      : shape_(shape),
        classes_(classes),
        size_(size),
        split_(static_cast<uint64_t>(split)),
        seed_(seed),
        norm_(std::move(norm)),
        blocks_y_(std::min(shape[1], kBlocks)),
        blocks_x_(std::min(shape[2], kBlocks)),
        patterns_(classes * shape[0] * blocks_y_ * blocks_x_) {
    for (size_t i = 0; i < patterns_.size(); ++i) {
      float u = random_uniform(seed_, stream_id(RngStream::synthetic_data, kPatternStream), i);
      patterns_[i] = kPatternAmplitude * (2.0f * u - 1.0f);
    }
    for (int64_t y = 0; y < shape[1]; ++y) row_block_.push_back(y * blocks_y_ / shape[1]);
    for (int64_t x = 0; x < shape[2]; ++x) col_block_.push_back(x * blocks_x_ / shape[2]);
  }

  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return classes_; }
  std::string describe() const override {
    return describe_dataset("synthetic", static_cast<Split>(split_), size_, shape_, classes_,
                            "seed " + std::to_string(seed_));
  }

  int32_t load(int64_t index, float* out, int64_t /*epoch*/) const override {
    DTRAIN_CHECK(index >= 0 && index < size_) << "sample " << index << " of " << size_;
    const uint64_t i = static_cast<uint64_t>(index);
    const int32_t label = static_cast<int32_t>(
        random_bits(seed_, stream_id(RngStream::synthetic_data, kLabelStream + split_), i) %
        static_cast<uint64_t>(classes_));
    const int64_t C = shape_[0], H = shape_[1], W = shape_[2], numel = C * H * W;
    // Noise first, four 16-bit uniforms per hash, in a loop the compiler can vectorise: an
    // ImageNet-sized sample takes a fraction of a millisecond.
    const uint64_t noise_stream = stream_id(RngStream::synthetic_data, kNoiseStream + split_);
    const int64_t words = numel / 4;
    for (int64_t w = 0; w < words; ++w) {
      const uint64_t bits = random_bits(seed_, noise_stream, i * (words + 1) + w);
      for (int k = 0; k < 4; ++k) out[4 * w + k] = unit_noise(bits >> (16 * k));
    }
    const uint64_t tail = random_bits(seed_, noise_stream, i * (words + 1) + words);
    for (int64_t e = 4 * words; e < numel; ++e) out[e] = unit_noise(tail >> (16 * (e - 4 * words)));
    // Then the class pattern and the normalisation.
    const float* pattern = patterns_.data() + label * C * blocks_y_ * blocks_x_;
    for (int64_t c = 0; c < C; ++c) {
      const float scale = 1.0f / norm_.std[c], shift = norm_.mean[c];
      for (int64_t y = 0; y < H; ++y) {
        const float* prow = pattern + (c * blocks_y_ + row_block_[y]) * blocks_x_;
        float* o = out + (c * H + y) * W;
        for (int64_t x = 0; x < W; ++x) o[x] = (o[x] + prow[col_block_[x]] - shift) * scale;
      }
    }
    return label;
  }

 private:
  Shape shape_;
  int64_t classes_, size_;
  uint64_t split_, seed_;
  Normalization norm_;
  int64_t blocks_y_, blocks_x_;
  std::vector<float> patterns_;                 // [classes, C, blocks_y, blocks_x]
  std::vector<int32_t> row_block_, col_block_;  // pattern block of each row and column
};

// Sizes of a split when dataset.train_size / test_size are 0.
constexpr int64_t kTrainSize = 1024, kTestSize = 256;

std::unique_ptr<Dataset> open_synthetic(const DatasetConfig& config, const SyntheticOptions& o,
                                        Split split, uint64_t seed) {
  DTRAIN_INPUT_CHECK(o.shape.size() == 3)
      << "dataset.shape: expected [C, H, W], got " << o.shape.size() << " value(s)";
  const Shape shape(std::vector<int64_t>(o.shape.begin(), o.shape.end()));
  for (int64_t d : shape.dims()) {
    DTRAIN_INPUT_CHECK(d > 0) << "dataset.shape: " << shape.str() << " has a dimension ≤ 0";
  }
  DTRAIN_INPUT_CHECK(o.classes >= 1) << "dataset.classes: " << o.classes << " is not ≥ 1";
  const char* key = split == Split::train ? "dataset.train_size" : "dataset.test_size";
  int64_t size = split == Split::train ? config.train_size : config.test_size;
  DTRAIN_INPUT_CHECK(size >= 0) << key << ": " << size << " is negative";
  if (size == 0) size = split == Split::train ? kTrainSize : kTestSize;
  return generate_images(
      shape, o.classes, size, split, seed,
      resolve_normalization(config, shape[0], Normalization::identity(shape[0])));
}

config::Schema<SyntheticOptions> synthetic_schema() {
  using namespace config;
  return Schema<SyntheticOptions>("synthetic")
      .key("shape", &SyntheticOptions::shape, list_of(integer(Bounds::above(0)), 3),
           "[channels, height, width] of a sample")
      .key("classes", &SyntheticOptions::classes, integer(Bounds::at_least(2)),
           "number of classes");
}

}  // namespace

std::unique_ptr<Dataset> generate_images(const Shape& shape, int64_t classes, int64_t size,
                                         Split split, uint64_t seed, Normalization norm) {
  return std::make_unique<SyntheticDataset>(shape, classes, size, split, seed, std::move(norm));
}

DatasetEntry synthetic_dataset() {
  return {
      .name = "synthetic",
      .summary =
          "generated images: uniform noise plus a coarse pattern of the class, the same "
          "on every run and rank (throughput measurements, tests)",
      .keys = config::erase(synthetic_schema()),
      .open = opener_of<SyntheticOptions>(open_synthetic),
      .on_disk = OnDisk::nothing(),
      .channels =
          [](const DatasetConfig& d) {
            const auto& shape = d.get<SyntheticOptions>().shape;
            return shape.size() == 3 ? shape[0] : 0;
          },
      .channels_from = {"shape"},
      .offers = "`shape` images, `classes` classes",
      .train_size_zero = "0 means " + std::to_string(kTrainSize),
      .test_size_zero = "0 means " + std::to_string(kTestSize),
      .keys_after = "test_batch_size",  // what it generates comes before how many
      .own_key_reasons = {{"shape", "the other datasets define their shape"},
                          {"classes", "the other datasets define their classes"}},
  };
}

}  // namespace dtrain
