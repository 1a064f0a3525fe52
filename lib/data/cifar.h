// CIFAR-10 and CIFAR-100 in their binary distributions (cifar-10-batches-bin, cifar-100-binary).
#pragma once
#include <memory>  // unique_ptr

#include "data/dataset.h"  // Dataset, DatasetOptions, Split

namespace dtrain {

// options.name is "cifar10" or "cifar100"; options.path is the folder holding the .bin files or
// its parent.
std::unique_ptr<Dataset> open_cifar(const DatasetOptions& options, Split split);

}  // namespace dtrain
