// The Loader on language-model windows: labels [rows, T], every window once per epoch over the
// ranks, shuffled per epoch by the seed, the validation split covered in full.
#include <doctest/doctest.h>

#include <algorithm>  // sort
#include <numeric>    // iota
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "fixtures.h"        // TempDir
#include "token_fixtures.h"  // write_token_file, counting_tokens, token_options

using namespace dtrain;
using namespace dtrain::testing;

namespace {

constexpr int64_t kBlock = 8;

// The windows of one rank's epoch, in order (a window's first input is 8 × its index), each
// batch checked: [rows, T] labels, the inputs shifted by one.
std::vector<int64_t> rank_epoch(Loader& loader, int64_t epoch) {
  std::vector<int64_t> windows;
  loader.start_epoch(epoch);
  Batch b;
  while (loader.next(b)) {
    const int64_t rows = b.images.shape()[0];
    REQUIRE(b.images.shape() == Shape{rows, kBlock});
    REQUIRE(b.labels.shape() == Shape{rows, kBlock});
    const float* x = b.images.data<float>();
    const int32_t* y = b.labels.data<int32_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t first = static_cast<int64_t>(x[r * kBlock]);
      CHECK(first % kBlock == 0);
      for (int64_t t = 0; t < kBlock; ++t) {
        CHECK(x[r * kBlock + t] == static_cast<float>(first + t));
        CHECK(y[r * kBlock + t] == first + t + 1);
      }
      windows.push_back(first / kBlock);
    }
  }
  return windows;
}

LoaderOptions options(int64_t batch, int rank, int world, bool training) {
  LoaderOptions o;
  o.global_batch = batch;
  o.rank = rank;
  o.world = world;
  o.seed = 11;
  o.shuffle = training;
  o.drop_last = training;
  return o;
}

}  // namespace

TEST_CASE("token loader: every window once per epoch over the ranks, shuffled by seed and epoch") {
  TempDir dir;
  write_token_file(dir.path() / "train.bin", counting_tokens(24 * kBlock + 1));
  write_token_file(dir.path() / "val.bin", counting_tokens(10 * kBlock + 5));
  auto train = open_dataset(token_options(dir.str(), kBlock), Split::train);
  REQUIRE(train->size() == 24);
  std::vector<int64_t> all(24);
  std::iota(all.begin(), all.end(), 0);
  std::vector<std::vector<int64_t>> epochs;
  for (int64_t epoch : {0, 1}) {
    std::vector<int64_t> seen, order;
    for (int rank = 0; rank < 3; ++rank) {
      Loader loader(*train, options(6, rank, 3, true));
      CHECK(loader.batches_per_epoch() == 4);
      const std::vector<int64_t> mine = rank_epoch(loader, epoch);
      CHECK(mine.size() == 8);
      seen.insert(seen.end(), mine.begin(), mine.end());
      // The same seed, the same order; a new loader repeats it.
      Loader again(*train, options(6, rank, 3, true));
      CHECK(rank_epoch(again, epoch) == mine);
    }
    order = seen;
    std::sort(seen.begin(), seen.end());
    CHECK(seen == all);
    CHECK(order != all);  // shuffled
    epochs.push_back(order);
  }
  CHECK(epochs[0] != epochs[1]);  // differs between epochs

  // Evaluation: the whole validation split in order, once, over two ranks.
  auto test = open_dataset(token_options(dir.str(), kBlock), Split::test);
  REQUIRE(test->size() == 10);
  std::vector<int64_t> seen;
  for (int rank = 0; rank < 2; ++rank) {
    Loader loader(*test, options(4, rank, 2, false));
    CHECK(loader.batches_per_epoch() == 3);
    const std::vector<int64_t> mine = rank_epoch(loader, 0);
    seen.insert(seen.end(), mine.begin(), mine.end());
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> every(10);
  std::iota(every.begin(), every.end(), 0);
  CHECK(seen == every);
}

TEST_CASE("token loader: image datasets keep labels [rows]") {
  IndexDataset data(20);
  Loader loader(data, options(5, 0, 1, true));
  loader.start_epoch(0);
  Batch b;
  REQUIRE(loader.next(b));
  CHECK(b.labels.shape() == Shape{5});
}
