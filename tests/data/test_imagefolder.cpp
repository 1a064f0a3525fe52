#include <doctest/doctest.h>

#include "core/error.h"          // InputError, Error
#include "data/dataset.h"        // open_dataset
#include "data/dataset_table.h"  // dataset_defaults
#include "data/imagefolder.h"    // ImageFolderOptions
#include "fixtures.h"            // TempDir, write_bytes

#ifdef DTRAIN_HAS_OPENCV
#include <opencv2/core.hpp>       // cv::Mat
#include <opencv2/imgcodecs.hpp>  // cv::imwrite
#endif

using namespace dtrain;
using namespace dtrain::testing;

namespace {

DatasetConfig folder_options(const TempDir& dir) {
  DatasetConfig o = dataset_defaults("imagefolder");
  o.path = dir.str();
  o.get<ImageFolderOptions>().resize = 16;
  o.get<ImageFolderOptions>().image_size = 12;
  o.mean = {0.0f, 0.0f, 0.0f};  // outputs are then plain [0, 1] values
  o.std = {1.0f, 1.0f, 1.0f};
  return o;
}

}  // namespace

#ifdef DTRAIN_HAS_OPENCV

namespace {

// A 40×30 (w×h) image of one BGR colour.
void write_solid(const fs::path& file, cv::Vec3b bgr) {
  fs::create_directories(file.parent_path());
  cv::Mat m(30, 40, CV_8UC3, cv::Scalar(bgr[0], bgr[1], bgr[2]));
  REQUIRE(cv::imwrite(file.string(), m));
}

// Red rising from left to right, so a mirrored crop is visible.
void write_ramp(const fs::path& file) {
  fs::create_directories(file.parent_path());
  cv::Mat m(30, 40, CV_8UC3);
  for (int y = 0; y < 30; ++y) {
    for (int x = 0; x < 40; ++x)
      m.at<cv::Vec3b>(y, x) = cv::Vec3b(0, 0, static_cast<uint8_t>(6 * x));
  }
  REQUIRE(cv::imwrite(file.string(), m));
}

}  // namespace

TEST_CASE("imagefolder: classes sorted by name, BGR → RGB, resize and centre crop") {
  TempDir dir;
  write_solid(dir.path() / "train/dog/a.png", {255, 0, 0});     // blue
  write_solid(dir.path() / "train/cat/b.png", {0, 0, 255});     // red
  write_solid(dir.path() / "train/cat/a.PNG", {0, 255, 0});     // green; extension case ignored
  write_bytes(dir.path() / "train/cat/notes.txt", {'h', 'i'});  // not an image: skipped
  fs::create_directories(dir.path() / "train/ant");             // a class without images
  write_solid(dir.path() / "val/dog/c.png", {255, 0, 0});

  auto train = open_dataset(folder_options(dir), Split::train);
  auto val = open_dataset(folder_options(dir), Split::test);
  CHECK(train->size() == 3);
  CHECK(val->size() == 1);
  CHECK(train->num_classes() == 3);  // ant, cat, dog
  CHECK(train->sample_shape() == Shape{3, 12, 12});
  CHECK(contains(train->describe(), "imagefolder train: 3 × [3, 12, 12], 3 classes"));

  std::vector<float> out(3 * 144);
  auto plane_mean = [&](int c) {
    float s = 0;
    for (int i = 0; i < 144; ++i) s += out[c * 144 + i];
    return s / 144;
  };
  CHECK(train->load(0, out.data(), 0) == 1);  // cat/a.PNG: green
  CHECK(plane_mean(0) == doctest::Approx(0.0f));
  CHECK(plane_mean(1) == doctest::Approx(1.0f));
  CHECK(train->load(1, out.data(), 0) == 1);  // cat/b.png: red
  CHECK(plane_mean(0) == doctest::Approx(1.0f));
  CHECK(plane_mean(2) == doctest::Approx(0.0f));
  CHECK(val->load(0, out.data(), 0) == 2);  // dog, numbered as in train/
  CHECK(plane_mean(2) == doctest::Approx(1.0f));
}

TEST_CASE("imagefolder: ImageNet statistics by default, random crops and flips when augmenting") {
  TempDir dir;
  write_ramp(dir.path() / "train/x/ramp.png");
  write_ramp(dir.path() / "test/x/ramp.png");  // test/ serves when there is no val/
  DatasetConfig o = folder_options(dir);
  o.mean = {};
  o.std = {};
  std::vector<float> out(3 * 144);
  open_dataset(o, Split::test)->load(0, out.data(), 0);
  CHECK(out[144] == doctest::Approx((0.0f - 0.456f) / 0.224f));  // green plane

  o = folder_options(dir);
  o.augment = true;
  auto train = open_dataset(o, Split::train);
  int flipped = 0, straight = 0;
  std::vector<float> again(3 * 144);
  for (int64_t epoch = 0; epoch < 16; ++epoch) {
    train->load(0, out.data(), epoch);
    train->load(0, again.data(), epoch);
    CHECK(out == again);
    if (out[0] > out[11]) ++flipped;
    if (out[0] < out[11]) ++straight;
  }
  CHECK(flipped + straight == 16);
  CHECK(flipped >= 2);
  CHECK(straight >= 2);
}

TEST_CASE("imagefolder: an undecodable image is an InputError naming the file (exit 2)") {
  TempDir dir;
  write_bytes(dir.path() / "train/x/broken.jpg", {1, 2, 3, 4});
  auto train = open_dataset(folder_options(dir), Split::train);
  std::vector<float> out(3 * 144);
  bool input_error = false;
  std::string why;
  try {
    train->load(0, out.data(), 0);
  } catch (const InputError& e) {
    input_error = true;
    why = e.what();
  }
  CHECK(input_error);
  CHECK(contains(why, "broken.jpg: cannot read or decode the image"));
}

TEST_CASE("imagefolder: missing split folders, empty folders and bad sizes are InputErrors") {
  TempDir dir;
  auto open_error = [&](const DatasetConfig& o, Split split) {
    return message_of<InputError>([&] { open_dataset(o, split); });
  };
  DatasetConfig o = folder_options(dir);
  CHECK(contains(open_error(o, Split::train), "has no train/ folder"));
  fs::create_directories(dir.path() / "train");
  CHECK(contains(open_error(o, Split::train), "no class folders"));
  fs::create_directories(dir.path() / "train/x");
  CHECK(contains(open_error(o, Split::train), "train: no images"));
  CHECK(contains(open_error(o, Split::test), "has neither a val/ nor a test/ folder"));
  write_solid(dir.path() / "train/x/a.png", {1, 2, 3});
  write_solid(dir.path() / "val/y/a.png", {1, 2, 3});
  CHECK(contains(open_error(o, Split::test), "class folder not present in the train split"));
  o.get<ImageFolderOptions>().resize = 8;
  CHECK(contains(open_error(o, Split::train), "dataset.resize: 8 is smaller than"));
}

#else

TEST_CASE("imagefolder without OpenCV says so") {
  TempDir dir;
  CHECK(contains(message_of<InputError>([&] { open_dataset(folder_options(dir), Split::train); }),
                 "OpenCV"));
}

#endif
