// Image folders in the torchvision / ImageNet layout: <path>/train/<class>/<image> and
// <path>/val/<class>/<image> (or test/), decoded with OpenCV on each load.
#pragma once
#include <memory>  // unique_ptr

#include "data/dataset.h"  // Dataset, DatasetOptions, Split

namespace dtrain {

// Without OpenCV (DTRAIN_OPENCV=OFF) this throws an InputError saying so.
std::unique_ptr<Dataset> open_imagefolder(const DatasetOptions& options, Split split);

}  // namespace dtrain
