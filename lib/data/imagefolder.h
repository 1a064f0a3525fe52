// Image folders in the torchvision / ImageNet layout (dataset `imagefolder`):
// <path>/train/<class>/<image> and <path>/val/<class>/<image> (or test/), decoded with OpenCV on
// each load: by the image decoder plugin (data/image_decoder.h), loaded when the first image
// folder is opened. Without OpenCV (DTRAIN_OPENCV=OFF) opening one is an InputError saying so;
// where the plugin is missing or cannot be loaded, an Error naming every path it looked in.
#pragma once

namespace dtrain {

// The image folder's own keys: the shorter side is resized to `resize`, then an
// image_size × image_size crop is taken (random when augmenting, centred otherwise).
struct ImageFolderOptions {
  int image_size = 224;
  int resize = 256;
};

}  // namespace dtrain
