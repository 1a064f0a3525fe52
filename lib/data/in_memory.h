// InMemoryDataset: a whole split held as u8 CHW images (idx and CIFAR files are small enough),
// converted to normalised floats in load() by table lookup, with optional pad + random crop + flip.
#pragma once
#include <cstdint>  // uint8_t, int32_t, int64_t, uint64_t
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"    // Dataset
#include "data/normalize.h"  // Normalization, ByteLut

namespace dtrain {

struct ByteImages {
  Shape shape;                  // per sample [C, H, W]
  std::vector<uint8_t> pixels;  // size() × C·H·W, each sample CHW
  std::vector<int32_t> labels;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  // Keeps the first `n` samples (n ≤ size()).
  void truncate(int64_t n);
};

// Augmentation of small images: zero-pad by `pad`, crop back to H × W at a random offset, and
// mirror horizontally with probability 1/2 when `flip`.
struct PadCropFlip {
  int64_t pad = 0;
  bool flip = false;
};

class InMemoryDataset final : public Dataset {
 public:
  InMemoryDataset(ByteImages images, int64_t classes, const Normalization& norm,
                  std::optional<PadCropFlip> augment, uint64_t seed, std::string description);

  int64_t size() const override { return images_.size(); }
  Shape sample_shape() const override { return images_.shape; }
  int64_t num_classes() const override { return classes_; }
  int32_t load(int64_t index, float* out, int64_t epoch) const override;
  std::string describe() const override { return description_; }

 private:
  void load_augmented(const uint8_t* src, float* out, int64_t index, int64_t epoch) const;

  ByteImages images_;
  int64_t classes_;
  ByteLut lut_;
  std::optional<PadCropFlip> augment_;
  uint64_t seed_;
  std::string description_;
};

}  // namespace dtrain
