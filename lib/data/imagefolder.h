// Image folders in the torchvision / ImageNet layout: <path>/train/<class>/<image> and
// <path>/val/<class>/<image> (or test/), decoded with OpenCV on each load: by the image decoder
// plugin (data/image_decoder.h), loaded when the first image folder is opened.
#pragma once
#include <memory>  // unique_ptr

#include "data/dataset.h"  // Dataset, DatasetOptions, Split

namespace dtrain {

// Without OpenCV (DTRAIN_OPENCV=OFF) this throws an InputError saying so; where the plugin is
// missing or cannot be loaded, an Error naming every path it looked in.
std::unique_ptr<Dataset> open_imagefolder(const DatasetOptions& options, Split split);

}  // namespace dtrain
