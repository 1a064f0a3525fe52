#include <doctest/doctest.h>

#include "core/error.h"          // InputError
#include "data/dataset.h"        // open_dataset
#include "data/dataset_table.h"  // dataset_defaults
#include "fixtures.h"            // TempDir, cifar_bytes, cifar_pixel

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// CIFAR-10 with 2 records per training batch (10 in all) and 3 test records.
void write_cifar10(const fs::path& folder) {
  for (int b = 0; b < 5; ++b) {
    write_bytes(folder / ("data_batch_" + std::to_string(b + 1) + ".bin"),
                cifar_bytes(2 * b, 2, 1, 10));
  }
  write_bytes(folder / "test_batch.bin", cifar_bytes(100, 3, 1, 10));
}

DatasetConfig cifar_options(const std::string& name, const fs::path& path) {
  DatasetConfig o = dataset_defaults(name);
  o.path = path.string();
  return o;
}

}  // namespace

TEST_CASE("cifar10 reads all five training batches in order, from the folder or its parent") {
  TempDir dir;
  write_cifar10(dir.path() / "cifar-10-batches-bin");
  for (const fs::path& path : {dir.path(), dir.path() / "cifar-10-batches-bin"}) {
    auto train = open_dataset(cifar_options("cifar10", path), Split::train);
    auto test = open_dataset(cifar_options("cifar10", path), Split::test);
    CHECK(train->size() == 10);
    CHECK(test->size() == 3);
    CHECK(train->sample_shape() == Shape{3, 32, 32});
    CHECK(train->num_classes() == 10);
    std::vector<float> out(3072);
    CHECK(train->load(7, out.data(), 0) == 7);
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
    for (int c = 0; c < 3; ++c) {
      for (int i : {0, 31, 1023}) {
        CHECK(out[c * 1024 + i] ==
              doctest::Approx((cifar_pixel(7, c, i) / 255.0f - mean[c]) / std[c]));
      }
    }
    CHECK(test->load(2, out.data(), 0) == 102 % 10);
  }
}

TEST_CASE("cifar100 uses the fine label") {
  TempDir dir;
  write_bytes(dir.path() / "train.bin", cifar_bytes(0, 4, 2, 100));
  write_bytes(dir.path() / "test.bin", cifar_bytes(50, 2, 2, 100));
  auto train = open_dataset(cifar_options("cifar100", dir.path()), Split::train);
  auto test = open_dataset(cifar_options("cifar100", dir.path()), Split::test);
  CHECK(train->size() == 4);
  CHECK(train->num_classes() == 100);
  std::vector<float> out(3072);
  CHECK(test->load(1, out.data(), 0) == 51);
  CHECK(out[5] == doctest::Approx((cifar_pixel(51, 0, 5) / 255.0f - 0.5071f) / 0.2673f));
}

TEST_CASE("cifar: wrong sizes, missing batches and labels out of range are InputErrors") {
  TempDir dir;
  write_cifar10(dir.path());
  auto open_error = [&](const std::string& name) {
    return message_of<InputError>(
        [&] { open_dataset(cifar_options(name, dir.path()), Split::train); });
  };
  SUBCASE("not a whole number of records") {
    std::vector<uint8_t> b = cifar_bytes(0, 2, 1, 10);
    b.pop_back();
    write_bytes(dir.path() / "data_batch_3.bin", b);
    CHECK(contains(open_error("cifar10"), (dir.path() / "data_batch_3.bin").string() +
                                              ": 6145 bytes is not a whole number of 3073-byte "
                                              "records"));
  }
  SUBCASE("missing batch") {
    fs::remove(dir.path() / "data_batch_5.bin");
    CHECK(open_error("cifar10") == (dir.path() / "data_batch_5.bin").string() + ": missing");
  }
  SUBCASE("label out of range") {
    std::vector<uint8_t> b = cifar_bytes(0, 2, 1, 10);
    b[3073] = 10;
    write_bytes(dir.path() / "data_batch_2.bin", b);
    CHECK(contains(open_error("cifar10"), "label 10 of record 1 is outside [0, 10)"));
  }
  SUBCASE("no cifar files at all") {
    CHECK(contains(open_error("cifar100"), "holds neither test.bin nor a cifar-100-binary/"));
  }
}

TEST_CASE("cifar augmentation pads by 4 and stays deterministic") {
  TempDir dir;
  write_cifar10(dir.path());
  DatasetConfig o = cifar_options("cifar10", dir.path());
  o.augment = true;
  auto a = open_dataset(o, Split::train);
  std::vector<float> x(3072), y(3072);
  int changed = 0;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    a->load(1, x.data(), epoch);
    a->load(1, y.data(), epoch);
    CHECK(x == y);
    o.augment = false;
    std::vector<float> clean(3072);
    open_dataset(o, Split::train)->load(1, clean.data(), epoch);
    o.augment = true;
    if (clean != x) ++changed;
  }
  CHECK(changed >= 3);  // the identity is 1 of 81 × 2 draws
}
