// Per-channel normalisation, value = (pixel / 255 - mean) / std, resolved from the options or the
// dataset's standard statistics, and a byte → float table that makes converting a u8 image a
// single lookup per pixel.
#pragma once
#include <cstdint>  // int64_t
#include <vector>

#include "data/dataset_config.h"  // DatasetConfig: the user's mean and std

namespace dtrain {

struct Normalization {
  std::vector<float> mean, std;  // one value per channel

  // mean 0, std 1: leaves values unchanged (synthetic data).
  static Normalization identity(int64_t channels);
};

// The user's `dataset.mean` / `dataset.std` when given (checked: one value per channel, std > 0),
// otherwise `standard`.
Normalization resolve_normalization(const DatasetConfig& config, int64_t channels,
                                    const Normalization& standard);

// 256 floats per channel: the normalised value of every byte.
class ByteLut {
 public:
  explicit ByteLut(const Normalization& norm);
  const float* channel(int64_t c) const { return table_.data() + c * 256; }

 private:
  std::vector<float> table_;
};

}  // namespace dtrain
