// Synthetic images: deterministic, generated on demand, and learnable — uniform noise in [-1, 1]
// plus a coarse per-class pattern — so that benchmarks need no files and accuracy tests can
// train on them.
#pragma once
#include <memory>  // unique_ptr

#include "data/dataset.h"  // Dataset, DatasetOptions, Split

namespace dtrain {

// Uses options.shape ([C, H, W]), classes, train_size / test_size (0 → 1024 / 256) and seed.
std::unique_ptr<Dataset> open_synthetic(const DatasetOptions& options, Split split);

}  // namespace dtrain
