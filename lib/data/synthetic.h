// Synthetic images (dataset `synthetic`): deterministic, generated on demand, and learnable —
// uniform noise in [-1, 1] plus a coarse per-class pattern — so that benchmarks need no files
// and accuracy tests can train on them. The stand-ins of image datasets are made of them too.
#pragma once
#include <cstdint>  // int64_t, uint64_t
#include <memory>   // unique_ptr
#include <vector>

#include "core/shape.h"      // Shape
#include "data/dataset.h"    // Dataset, Split
#include "data/normalize.h"  // Normalization

namespace dtrain {

// The synthetic dataset's own keys.
struct SyntheticOptions {
  std::vector<int> shape{1, 28, 28};  // [C, H, W] of one sample
  int classes = 10;
};

// `size` generated samples of `split`: `shape`, labels in [0, classes), normalised by `norm`.
std::unique_ptr<Dataset> generate_images(const Shape& shape, int64_t classes, int64_t size,
                                         Split split, uint64_t seed, Normalization norm);

}  // namespace dtrain
