// libdtrain_image.so: see image_decoder.h. Self-contained: OpenCV and the C++ runtime only.
#include "data/image_decoder.h"

#include <opencv2/core.hpp>       // cv::Mat, cv::setNumThreads
#include <opencv2/imgcodecs.hpp>  // cv::imread
#include <opencv2/imgproc.hpp>    // cv::resize

#include <algorithm>  // min, max
#include <cmath>      // lround
#include <exception>
#include <string>

#define DTRAIN_IMAGE_EXPORT __attribute__((visibility("default")))

namespace {

// The calling thread's last image and error: reused from one call to the next.
thread_local cv::Mat resized;
thread_local std::string last_error;

int decode(const char* file, int shorter_side, DtrainImage* image) {
  const cv::Mat decoded = cv::imread(file, cv::IMREAD_COLOR);  // 8-bit BGR, grey expanded
  if (decoded.empty()) return DTRAIN_IMAGE_UNREADABLE;
  const double scale = static_cast<double>(shorter_side) / std::min(decoded.rows, decoded.cols);
  const int rows = std::max<int>(shorter_side, static_cast<int>(std::lround(decoded.rows * scale)));
  const int cols = std::max<int>(shorter_side, static_cast<int>(std::lround(decoded.cols * scale)));
  // Area averaging does not alias when shrinking; bilinear is right for enlarging.
  cv::resize(decoded, resized, cv::Size(cols, rows), 0, 0,
             scale < 1.0 ? cv::INTER_AREA : cv::INTER_LINEAR);
  image->pixels = resized.ptr<uint8_t>(0);
  image->rows = resized.rows;
  image->cols = resized.cols;
  image->step = resized.step[0];
  return DTRAIN_IMAGE_OK;
}

}  // namespace

extern "C" {

DTRAIN_IMAGE_EXPORT int dtrain_image_abi(void) {
  return DTRAIN_IMAGE_ABI;
}

DTRAIN_IMAGE_EXPORT int dtrain_image_decode(const char* file, int shorter_side,
                                            DtrainImage* image) {
  last_error.clear();
  // No exception may cross the C interface.
  try {
    return decode(file, shorter_side, image);
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown exception";
  }
  return DTRAIN_IMAGE_FAILED;
}

DTRAIN_IMAGE_EXPORT const char* dtrain_image_error(void) {
  return last_error.c_str();
}

DTRAIN_IMAGE_EXPORT void dtrain_image_set_threads(int threads) {
  try {
    cv::setNumThreads(threads);
  } catch (...) {  // a pool that cannot be resized: decoding works all the same
  }
}

}  // extern "C"
