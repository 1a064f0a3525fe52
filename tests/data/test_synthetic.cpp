#include <doctest/doctest.h>

#include <cmath>  // abs

#include "core/error.h"          // InputError
#include "data/dataset.h"        // open_dataset
#include "data/dataset_table.h"  // dataset_defaults
#include "data/synthetic.h"      // SyntheticOptions
#include "fixtures.h"            // message_of, contains

using namespace dtrain;
using namespace dtrain::testing;

namespace {

DatasetConfig synthetic(std::vector<int> shape, int classes) {
  DatasetConfig o = dataset_defaults("synthetic");
  o.get<SyntheticOptions>().shape = std::move(shape);
  o.get<SyntheticOptions>().classes = classes;
  return o;
}

}  // namespace

TEST_CASE("synthetic data is deterministic, sized by the options and differs between splits") {
  DatasetConfig o = synthetic({3, 5, 7}, 4);
  auto a = open_dataset(o, Split::train);
  auto b = open_dataset(o, Split::train);
  auto test = open_dataset(o, Split::test);
  CHECK(a->size() == 1024);
  CHECK(test->size() == 256);
  CHECK(a->sample_shape() == Shape{3, 5, 7});
  CHECK(a->num_classes() == 4);
  CHECK(contains(a->describe(), "synthetic train: 1024 × [3, 5, 7], 4 classes"));
  std::vector<float> x(105), y(105), z(105);
  std::vector<int> seen(4, 0);
  for (int64_t i = 0; i < 64; ++i) {
    int32_t label = a->load(i, x.data(), 0);
    CHECK(b->load(i, y.data(), 5) == label);  // the epoch does not matter
    CHECK(x == y);
    REQUIRE(label >= 0);
    REQUIRE(label < 4);
    ++seen[label];
    for (float v : x) CHECK(std::abs(v) <= 1.5f);
  }
  for (int n : seen) CHECK(n > 0);
  a->load(3, x.data(), 0);
  test->load(3, z.data(), 0);
  CHECK(x != z);

  open_dataset(o, Split::train, /*seed=*/2)->load(3, y.data(), 0);
  CHECK(x != y);

  o.train_size = 10;
  o.test_size = 3;
  CHECK(open_dataset(o, Split::train)->size() == 10);
  CHECK(open_dataset(o, Split::test)->size() == 3);
}

TEST_CASE("synthetic data is learnable: class means from train classify test") {
  DatasetConfig o = synthetic({1, 28, 28}, 10);
  auto train = open_dataset(o, Split::train);
  auto test = open_dataset(o, Split::test);
  const int64_t n = 784;
  std::vector<double> means(10 * n, 0.0);
  std::vector<int> counts(10, 0);
  std::vector<float> x(n);
  for (int64_t i = 0; i < train->size(); ++i) {
    int32_t label = train->load(i, x.data(), 0);
    ++counts[label];
    for (int64_t j = 0; j < n; ++j) means[label * n + j] += x[j];
  }
  for (int k = 0; k < 10; ++k) {
    for (int64_t j = 0; j < n; ++j) means[k * n + j] /= std::max(counts[k], 1);
  }
  int correct = 0;
  for (int64_t i = 0; i < test->size(); ++i) {
    int32_t label = test->load(i, x.data(), 0);
    int best = 0;
    double best_d = 1e300;
    for (int k = 0; k < 10; ++k) {
      double d = 0;
      for (int64_t j = 0; j < n; ++j) d += (x[j] - means[k * n + j]) * (x[j] - means[k * n + j]);
      if (d < best_d) best_d = d, best = k;
    }
    correct += best == label;
  }
  CHECK(correct > 0.9 * test->size());
}

TEST_CASE("synthetic: normalisation applies when given; bad options are InputErrors") {
  DatasetConfig o = synthetic({2, 2, 2}, 3);
  std::vector<float> x(8), y(8);
  open_dataset(o, Split::train)->load(0, x.data(), 0);
  o.mean = {1.0f, -1.0f};
  o.std = {2.0f, 0.5f};
  open_dataset(o, Split::train)->load(0, y.data(), 0);
  CHECK(y[0] == doctest::Approx((x[0] - 1.0f) / 2.0f));
  CHECK(y[7] == doctest::Approx((x[7] + 1.0f) / 0.5f));

  auto error = [](const DatasetConfig& bad) {
    return message_of<InputError>([&] { open_dataset(bad, Split::train); });
  };
  CHECK(contains(error(synthetic({3, 4}, 2)), "dataset.shape: expected [C, H, W]"));
  CHECK(contains(error(synthetic({3, 0, 4}, 2)), "dataset.shape: [3, 0, 4]"));
  CHECK(contains(error(synthetic({1, 4, 4}, 0)), "dataset.classes: 0"));
  o = synthetic({1, 4, 4}, 2);
  o.train_size = -1;
  CHECK(contains(error(o), "dataset.train_size: -1 is negative"));
}
