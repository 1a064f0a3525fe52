// The image decoder plugin, libdtrain_image.so (lib/data/image_decoder.cpp): OpenCV's decoding and
// resizing behind a C interface, the only part of dtrain that links OpenCV. imagefolder.cpp loads
// it when an image folder is opened, so that other runs never map OpenCV and the libraries it
// links (GDAL, GDCM, Poppler, ...: a third of a small run's resident memory). The plugin uses no
// other part of dtrain; this header is its whole interface, C so that neither side depends on
// the other's C++ library or its exceptions. Only built with DTRAIN_OPENCV (DTRAIN_HAS_OPENCV).
#pragma once
#include <stddef.h>  // size_t
#include <stdint.h>  // uint8_t

// What the loader and the plugin must agree on: bump with any change below. A plugin of another
// ABI is refused at load.
#define DTRAIN_IMAGE_ABI 1

#ifdef __cplusplus
extern "C" {
#endif

// A decoded, resized image: 8-bit BGR pixels (3 bytes each), `rows` rows of `cols` pixels,
// row y at pixels + y * step.
typedef struct DtrainImage {
  const uint8_t* pixels;
  int rows;
  int cols;
  size_t step;
} DtrainImage;

// The outcome of dtrain_image_decode.
enum {
  DTRAIN_IMAGE_OK = 0,
  DTRAIN_IMAGE_UNREADABLE = 1,  // missing, unreadable, corrupt, truncated or not an image
  DTRAIN_IMAGE_FAILED = 2,      // anything else: dtrain_image_error() says what
};

// DTRAIN_IMAGE_ABI of the plugin.
int dtrain_image_abi(void);

// Decodes `file` (colour, a grey image expanded to BGR) and resizes it so that its shorter side is
// `shorter_side`, aspect kept (area averaging when shrinking, bilinear when enlarging); the longer
// side is rounded and never below `shorter_side`. The pixels are in a buffer of the calling
// thread, valid until its next call.
int dtrain_image_decode(const char* file, int shorter_side, DtrainImage* image);

// Why the calling thread's last dtrain_image_decode failed ("" after a success).
const char* dtrain_image_error(void);

// The number of threads OpenCV may use inside one call (1: none of its own).
void dtrain_image_set_threads(int threads);

#ifdef __cplusplus
}
#endif
