// Stand-ins: what --dry-run and `dtrain plan` open when a dataset's files are missing — data
// with the dataset's own sample shape, classes or vocabulary and split sizes, but generated, and
// a describe() that says so. Each row of the dataset table builds its stand-in from these two.
#pragma once
#include <cstdint>  // int64_t, uint64_t
#include <memory>   // unique_ptr
#include <string>
#include <string_view>

#include "core/shape.h"    // Shape
#include "data/dataset.h"  // Dataset, DatasetConfig, Split

namespace dtrain {

// What a real image dataset holds: its sample shape, classes and split sizes, and what it
// resembles when that is not the dataset itself (" (as ImageNet)").
struct RealImages {
  Shape shape;
  int64_t classes = 0;
  int64_t train = 0, test = 0;
  std::string resembles{};
};

// Synthetic images of `real`'s shape and classes, `real`'s split sizes unless dataset.train_size
// / test_size ask for fewer, normalised with the user's mean and std when given.
std::unique_ptr<Dataset> stand_in_images(const DatasetConfig& config, Split split, uint64_t seed,
                                         const RealImages& real);

// Windows of `block_size` uniformly random ids below `vocab`, as many as `tokens` tokens of the
// split hold (or dataset.train_size / test_size of them); `what` says what the sizes copy.
// `missing` is what dataset.path lacks: "file" or "files".
std::unique_ptr<Dataset> stand_in_tokens(const DatasetConfig& config, Split split, uint64_t seed,
                                         int64_t block_size, int64_t tokens, int64_t vocab,
                                         std::string_view missing, std::string_view what);

}  // namespace dtrain
