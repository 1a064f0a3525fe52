// MNIST and Fashion-MNIST in the idx format (train-images-idx3-ubyte[.gz] etc.).
#pragma once
#include <memory>  // unique_ptr

#include "data/dataset.h"  // Dataset, DatasetOptions, Split

namespace dtrain {

// options.name is "mnist" or "fashion_mnist"; options.path is the folder holding the four files.
std::unique_ptr<Dataset> open_idx(const DatasetOptions& options, Split split);

}  // namespace dtrain
