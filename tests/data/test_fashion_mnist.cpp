#include <doctest/doctest.h>

#include <chrono>      // the loader's throughput, printed (never asserted: machines are noisy)
#include <filesystem>  // exists

#include "data/dataset.h"        // open_dataset
#include "data/dataset_table.h"  // dataset_defaults
#include "data/loader.h"         // Loader

using namespace dtrain;

TEST_CASE("the real Fashion-MNIST opens with 60000 / 10000 samples") {
  const std::string path = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(path)) {
    MESSAGE("skipped: " << path << " is absent (Debian package, see datasets/README.md)");
    return;
  }
  DatasetConfig o = dataset_defaults("fashion_mnist");
  o.path = path;
  auto train = open_dataset(o, Split::train);
  auto test = open_dataset(o, Split::test);
  CHECK(train->size() == 60000);
  CHECK(test->size() == 10000);
  CHECK(train->sample_shape() == Shape{1, 28, 28});
  CHECK(train->describe() == "fashion_mnist train: 60000 × [1, 28, 28], 10 classes (" + path + ")");

  // Normalised with the dataset's own statistics, the training set has mean ≈ 0 and std ≈ 1.
  std::vector<float> x(784);
  double sum = 0, sum2 = 0;
  std::vector<int> per_class(10, 0);
  for (int64_t i = 0; i < train->size(); i += 10) {
    ++per_class[train->load(i, x.data(), 0)];
    for (float v : x) sum += v, sum2 += double{v} * v;
  }
  const double n = 6000.0 * 784;
  CHECK(std::abs(sum / n) < 0.02);
  CHECK(sum2 / n == doctest::Approx(1.0).epsilon(0.03));
  for (int c : per_class) CHECK(c > 400);  // balanced: 600 each

  LoaderOptions lo;
  lo.global_batch = 100;
  Loader loader(*train, lo);
  const auto start = std::chrono::steady_clock::now();
  loader.start_epoch(0);
  Batch b;
  int64_t samples = 0;
  while (loader.next(b)) samples += b.labels.numel();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(samples == 60000);
  MESSAGE("loader: one Fashion-MNIST epoch in " << s << " s (" << samples / s << " samples/s)");
}
