#include <doctest/doctest.h>

#include <algorithm>  // find

#include "core/error.h"          // InputError
#include "data/dataset.h"        // open_dataset
#include "data/dataset_table.h"  // dataset_defaults
#include "fixtures.h"            // TempDir, write_idx_split, idx_bytes

using namespace dtrain;
using namespace dtrain::testing;

namespace {

DatasetConfig idx_options(const TempDir& dir, const std::string& name = "mnist") {
  DatasetConfig o = dataset_defaults(name);
  o.path = dir.str();
  return o;
}

// The error message of opening the train split, which must be an InputError.
std::string open_error(const DatasetConfig& o, Split split = Split::train) {
  return message_of<InputError>([&] { open_dataset(o, split); });
}

}  // namespace

TEST_CASE("idx round-trips plain and gzip files, normalised with the standard statistics") {
  for (bool gz : {false, true}) {
    CAPTURE(gz);
    TempDir dir;
    write_idx_split(dir.path(), "train", 5, 3, 4, gz);
    write_idx_split(dir.path(), "t10k", 2, 3, 4, gz);
    auto train = open_dataset(idx_options(dir), Split::train);
    auto test = open_dataset(idx_options(dir), Split::test);
    CHECK(train->size() == 5);
    CHECK(test->size() == 2);
    CHECK(train->sample_shape() == Shape{1, 3, 4});
    CHECK(train->num_classes() == 10);
    CHECK(contains(train->describe(), "mnist train: 5 × [1, 3, 4], 10 classes"));
    std::vector<float> out(12);
    for (int64_t s = 0; s < 5; ++s) {
      CHECK(train->load(s, out.data(), 0) == idx_label(s));
      for (int i = 0; i < 12; ++i) {
        CHECK(out[i] == doctest::Approx((idx_pixel(s, i) / 255.0f - 0.1307f) / 0.3081f));
      }
    }
  }
}

TEST_CASE("idx: fashion_mnist statistics, user statistics and the first N samples") {
  TempDir dir;
  write_idx_split(dir.path(), "train", 6, 2, 2, false);
  DatasetConfig o = idx_options(dir, "fashion_mnist");
  std::vector<float> out(4);
  auto fashion = open_dataset(o, Split::train);
  fashion->load(1, out.data(), 0);
  CHECK(out[0] == doctest::Approx((idx_pixel(1, 0) / 255.0f - 0.2860f) / 0.3530f));

  o.mean = {0.5f};
  o.std = {0.25f};
  o.train_size = 4;
  auto custom = open_dataset(o, Split::train);
  CHECK(custom->size() == 4);
  custom->load(3, out.data(), 0);
  CHECK(out[2] == doctest::Approx((idx_pixel(3, 2) / 255.0f - 0.5f) / 0.25f));

  o.train_size = 7;
  CHECK(contains(open_error(o), "dataset.train_size: 7 exceeds the 6 samples"));
  o.train_size = 0;
  o.mean = {0.5f, 0.5f};
  CHECK(contains(open_error(o), "dataset.mean: expected 1 value(s)"));
  o.mean = {};
  o.std = {0.0f};
  CHECK(contains(open_error(o), "dataset.std: 0 is not > 0"));
}

TEST_CASE("idx: truncated, wrong magic, trailing bytes, count mismatch and bad labels") {
  TempDir dir;
  const fs::path images = dir.path() / "train-images-idx3-ubyte.gz";
  const fs::path labels = dir.path() / "train-labels-idx1-ubyte.gz";
  std::vector<uint8_t> pixels(2 * 28 * 28, 9);
  write_bytes(labels, idx_bytes(2049, {2}, {1, 2}), true);

  SUBCASE("truncated") {
    std::vector<uint8_t> cut(pixels.begin(), pixels.begin() + 984);  // 16 + 984 = 1000 bytes
    write_bytes(images, idx_bytes(2051, {60000, 28, 28}, cut), true);
    CHECK(open_error(idx_options(dir)) ==
          images.string() + ": truncated: expected 47040016 bytes, got 1000");
  }
  SUBCASE("header cut short") {
    write_bytes(images, {0, 0, 8, 3, 0}, true);
    CHECK(contains(open_error(idx_options(dir)), images.string() + ": truncated"));
  }
  SUBCASE("wrong magic") {
    write_bytes(images, idx_bytes(2049, {2, 28, 28}, pixels), true);
    std::string why = open_error(idx_options(dir));
    CHECK(contains(why, images.string()));
    CHECK(contains(why, "wrong magic number 2049, expected 2051"));
  }
  SUBCASE("trailing bytes") {
    pixels.push_back(0);
    write_bytes(images, idx_bytes(2051, {2, 28, 28}, pixels), true);
    CHECK(contains(open_error(idx_options(dir)), images.string() + ": expected 1584 bytes"));
  }
  SUBCASE("count mismatch") {
    pixels.resize(3 * 28 * 28);
    write_bytes(images, idx_bytes(2051, {3, 28, 28}, pixels), true);
    std::string why = open_error(idx_options(dir));
    CHECK(contains(why,
                   labels.string() + " holds 2 labels but " + images.string() + " holds 3 images"));
  }
  SUBCASE("label out of range") {
    write_bytes(images, idx_bytes(2051, {2, 28, 28}, pixels), true);
    write_bytes(labels, idx_bytes(2049, {2}, {1, 12}), true);
    CHECK(contains(open_error(idx_options(dir)),
                   labels.string() + ": label 12 of sample 1 is outside [0, 10)"));
  }
  SUBCASE("gzip stream cut off") {
    write_idx_split(dir.path(), "train", 50, 28, 28, true);
    std::vector<uint8_t> whole(fs::file_size(images));
    std::ifstream(images, std::ios::binary)
        .read(reinterpret_cast<char*>(whole.data()), static_cast<std::streamsize>(whole.size()));
    whole.resize(whole.size() / 2);
    write_bytes(images, whole, false);
    CHECK(contains(open_error(idx_options(dir)), images.string() + ": truncated: expected 39216"));
  }
}

TEST_CASE("idx: missing files and folders name what was expected") {
  TempDir dir;
  write_idx_split(dir.path(), "train", 2, 2, 2, false);
  std::string why = open_error(idx_options(dir), Split::test);
  CHECK(contains(why, "dataset.path: " + dir.str() + " holds no t10k-images-idx3-ubyte[.gz]"));

  fs::remove(dir.path() / "train-labels-idx1-ubyte");
  CHECK(contains(open_error(idx_options(dir)), "train-labels-idx1-ubyte[.gz]"));

  DatasetConfig o = idx_options(dir);
  o.path = (dir.path() / "nope").string();
  CHECK(contains(open_error(o), "dataset.path: " + o.path +
                                    " does not exist (datasets/README.md says how to obtain"));
  o.path = "";
  CHECK(contains(open_error(o), "dataset.path: required for mnist"));
  o.name = "imagenet22k";
  CHECK(contains(open_error(o), "dataset.name: unknown dataset 'imagenet22k'"));
}

TEST_CASE("idx: augmentation shifts and is deterministic per (seed, epoch, index)") {
  TempDir dir;
  write_idx_split(dir.path(), "train", 4, 8, 8, false);
  DatasetConfig o = idx_options(dir, "fashion_mnist");
  o.augment = true;
  auto a = open_dataset(o, Split::train);
  auto b = open_dataset(o, Split::train);
  std::vector<float> x(64), y(64);
  int differs_from_epoch0 = 0;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    a->load(2, x.data(), epoch);
    b->load(2, y.data(), epoch);
    CHECK(x == y);
    std::vector<float> e0(64);
    a->load(2, e0.data(), 0);
    if (e0 != x) ++differs_from_epoch0;
  }
  CHECK(differs_from_epoch0 >= 5);  // 25 shifts × 2 flips: epochs rarely repeat

  // The test split is never augmented.
  write_idx_split(dir.path(), "t10k", 1, 8, 8, false);
  auto test = open_dataset(o, Split::test);
  test->load(0, x.data(), 1);
  test->load(0, y.data(), 2);
  CHECK(x == y);

  // Every augmented value is either an original pixel value or the padding.
  o.augment = false;
  auto clean = open_dataset(o, Split::train);
  std::vector<float> c(64);
  clean->load(2, c.data(), 0);
  const float pad = (0.0f - 0.2860f) / 0.3530f;
  a->load(2, x.data(), 3);
  for (float v : x) {
    bool known = v == pad || std::find(c.begin(), c.end(), v) != c.end();
    CHECK(known);
  }
}
