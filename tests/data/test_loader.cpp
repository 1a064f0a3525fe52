#include <doctest/doctest.h>

#include <algorithm>  // sort
#include <chrono>     // the polls for the loader thread
#include <numeric>    // iota
#include <set>
#include <thread>  // this_thread::sleep_for

#include "core/error.h"     // InputError, Error
#include "data/loader.h"    // Loader
#include "data/sharding.h"  // epoch_order, rank_rows
#include "fixtures.h"       // IndexDataset

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// The sample indices of one batch (IndexDataset writes the index into every value), checked
// against the labels and the batch's shape.
std::vector<int64_t> indices_of(const Batch& b, int64_t sample_numel) {
  std::vector<int64_t> out;
  const int64_t rows = b.labels.shape()[0];
  REQUIRE(b.images.shape()[0] == rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* img = b.images.data<float>() + r * sample_numel;
    const int64_t index = static_cast<int64_t>(img[0]);
    CHECK(img[sample_numel - 1] == img[0]);
    CHECK(b.labels.data<int32_t>()[r] == index % 10);
    out.push_back(index);
  }
  return out;
}

// All batches of one epoch, each as its list of sample indices.
std::vector<std::vector<int64_t>> epoch_batches(Loader& loader, int64_t epoch, int64_t numel = 4) {
  std::vector<std::vector<int64_t>> batches;
  loader.start_epoch(epoch);
  Batch b;
  while (loader.next(b)) {
    CHECK(b.index == static_cast<int64_t>(batches.size()));
    batches.push_back(indices_of(b, numel));
  }
  CHECK_FALSE(loader.next(b));  // stays at the end
  return batches;
}

LoaderOptions loader_options(int64_t batch, int rank = 0, int world = 1) {
  LoaderOptions o;
  o.global_batch = batch;
  o.rank = rank;
  o.world = world;
  o.seed = 7;
  return o;
}

}  // namespace

TEST_CASE("epoch order is a seeded permutation, different per epoch, identity without shuffle") {
  std::vector<int64_t> a = epoch_order(1000, 7, 3, true);
  CHECK(a == epoch_order(1000, 7, 3, true));
  CHECK(a != epoch_order(1000, 7, 4, true));
  CHECK(a != epoch_order(1000, 8, 3, true));
  std::vector<int64_t> sorted = a, identity(1000);
  std::sort(sorted.begin(), sorted.end());
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(sorted == identity);
  CHECK(a != identity);
  CHECK(epoch_order(1000, 7, 3, false) == identity);
  CHECK(epoch_order(1, 7, 0, true) == std::vector<int64_t>{0});
}

TEST_CASE("rank rows split a batch into contiguous floor slices") {
  CHECK(rank_rows(12, 1, 4).begin == 3);
  CHECK(rank_rows(12, 1, 4).end == 6);
  CHECK(rank_rows(7, 0, 4).size() == 1);  // ⌊7·r/4⌋ = 0, 1, 3, 5, 7
  CHECK(rank_rows(7, 3, 4).size() == 2);
  CHECK(rank_rows(2, 0, 4).size() == 0);
}

TEST_CASE("loader: batches follow the epoch permutation; drop_last decides the remainder") {
  IndexDataset data(103);
  for (bool drop_last : {true, false}) {
    CAPTURE(drop_last);
    LoaderOptions o = loader_options(12);
    o.drop_last = drop_last;
    Loader loader(data, o);
    CHECK(loader.local_batch() == 12);
    CHECK(loader.batches_per_epoch() == (drop_last ? 8 : 9));
    std::vector<std::vector<int64_t>> batches = epoch_batches(loader, 2);
    REQUIRE(static_cast<int64_t>(batches.size()) == loader.batches_per_epoch());
    std::vector<int64_t> order = epoch_order(103, 7, 2, true), flat;
    for (const auto& b : batches) flat.insert(flat.end(), b.begin(), b.end());
    order.resize(flat.size());
    CHECK(flat == order);
    CHECK(batches.back().size() == (drop_last ? 12u : 7u));
    CHECK(epoch_batches(loader, 2) == batches);  // the same epoch again: the same batches
    CHECK(epoch_batches(loader, 3) != batches);
  }
  LoaderOptions o = loader_options(10);
  o.shuffle = false;
  Loader ordered(data, o);
  CHECK(epoch_batches(ordered, 0)[1] ==
        std::vector<int64_t>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
}

TEST_CASE("loader: rank slices in rank order concatenate to the 1-rank batch") {
  for (int64_t size : {103, 98}) {  // last batch of 7 and of 2 samples
    IndexDataset data(size);
    for (bool drop_last : {true, false}) {
      LoaderOptions one = loader_options(12);
      one.drop_last = drop_last;
      Loader single(data, one);
      const std::vector<std::vector<int64_t>> reference = epoch_batches(single, 1);
      for (int world : {2, 3, 4}) {
        CAPTURE(size);
        CAPTURE(drop_last);
        CAPTURE(world);
        std::vector<std::vector<int64_t>> joined(reference.size());
        bool some_rank_empty = false;
        for (int rank = 0; rank < world; ++rank) {
          LoaderOptions o = loader_options(12, rank, world);
          o.drop_last = drop_last;
          Loader loader(data, o);
          CHECK(loader.local_batch() == 12 / world);
          std::vector<std::vector<int64_t>> mine = epoch_batches(loader, 1);
          REQUIRE(mine.size() == reference.size());  // every rank sees every batch
          for (size_t g = 0; g < mine.size(); ++g) {
            CHECK(static_cast<int64_t>(mine[g].size()) <= 12 / world);
            some_rank_empty = some_rank_empty || mine[g].empty();
            joined[g].insert(joined[g].end(), mine[g].begin(), mine[g].end());
          }
        }
        CHECK(joined == reference);
        CHECK(some_rank_empty == (!drop_last && size == 98 && world >= 3));
      }
    }
  }
}

TEST_CASE("loader: prefetch depth and worker count do not change the batches") {
  IndexDataset data(250, Shape{2, 3, 5});
  LoaderOptions o = loader_options(20, 1, 2);
  o.drop_last = false;
  o.prefetch = 0;
  Loader sync(data, o);
  const auto reference = epoch_batches(sync, 4, 30);
  for (int prefetch : {1, 2, 5}) {
    for (int workers : {1, 3}) {
      o.prefetch = prefetch;
      o.workers = workers;
      Loader loader(data, o);
      CHECK(epoch_batches(loader, 4, 30) == reference);
    }
  }
}

TEST_CASE("loader: buffers are allocated once and reused across epochs") {
  IndexDataset data(100);
  LoaderOptions o = loader_options(10);
  o.prefetch = 2;
  Loader loader(data, o);
  std::set<void*> buffers;
  Batch b;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.start_epoch(epoch);
    while (loader.next(b)) buffers.insert(b.images.raw());
  }
  CHECK(buffers.size() <= 3);  // prefetch + the one lent out
}

TEST_CASE("loader: start_epoch mid-epoch discards the rest of the old epoch") {
  IndexDataset data(200);
  for (int prefetch : {0, 3}) {
    LoaderOptions o = loader_options(10);
    o.prefetch = prefetch;
    Loader fresh(data, o);
    const auto reference = epoch_batches(fresh, 1);
    Loader loader(data, o);
    loader.start_epoch(0);
    Batch b;
    REQUIRE(loader.next(b));
    REQUIRE(loader.next(b));
    CHECK(epoch_batches(loader, 1) == reference);
    loader.start_epoch(2);
    loader.start_epoch(1);  // twice in a row
    CHECK(epoch_batches(loader, 1) == reference);
  }
}

TEST_CASE("loader: a failure while loading is rethrown by next(), in batch order") {
  IndexDataset data(100, Shape{1, 2, 2}, /*fail_at=*/25);
  for (int prefetch : {0, 2}) {
    LoaderOptions o = loader_options(10);
    o.shuffle = false;
    o.prefetch = prefetch;
    Loader loader(data, o);
    loader.start_epoch(0);
    Batch b;
    CHECK(loader.next(b));
    CHECK(loader.next(b));
    CHECK(b.index == 1);
    CHECK_THROWS_WITH_AS(loader.next(b), "sample 25 broken", std::runtime_error);
    // A new epoch starts afresh.
    loader.start_epoch(1);
    CHECK(loader.next(b));
    CHECK(b.index == 0);
  }
}

TEST_CASE("loader: destruction mid-epoch stops the batch being filled after its current sample") {
  // Counted in samples, not seconds: each takes 2 ms to load, and a batch is 100. A destruction
  // that waited for the batch being filled would load all 100; one that stops it loads the
  // sample in progress, plus one per 2 ms that this thread takes to reach the destructor's stop
  // once it decided to destroy (a stall of 100 ms on a busy machine would still pass).
  IndexDataset slow(10000, Shape{1, 2, 2}, -1, /*sleep_us=*/2000);
  LoaderOptions o = loader_options(100);
  o.prefetch = 3;
  {
    Loader idle(slow, o);  // never started: nothing to stop
  }
  CHECK(slow.loads.load() == 0);
  {
    Loader started(slow, o);
    started.start_epoch(0);
    while (slow.loads == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }  // destroyed while filling its first batch
  CHECK(slow.loads.load() < 50);
  slow.loads = 0;
  {
    Loader loader(slow, o);
    loader.start_epoch(0);
    Batch b;
    REQUIRE(loader.next(b));  // one batch must be waited for
    CHECK(slow.loads.load() >= 100);
  }  // destroyed while filling the next one
  CHECK(slow.loads.load() < 150);
}

TEST_CASE("loader: impossible configurations are InputErrors") {
  IndexDataset data(50);
  auto error = [&](LoaderOptions o) {
    return message_of<InputError>([&] { Loader loader(data, o); });
  };
  CHECK(contains(error(loader_options(10, 0, 3)),
                 "dataset.batch_size: 10 is not divisible by the 3 data-parallel ranks"));
  CHECK(contains(error(loader_options(64)), "dataset.batch_size: 64 exceeds the 50 samples"));
  CHECK(contains(error(loader_options(0)), "dataset.batch_size: 0"));
  CHECK(contains(error(loader_options(10, 2, 2)), "rank 2 outside [0, 2)"));
  LoaderOptions o = loader_options(64);
  o.drop_last = false;
  Loader partial(data, o);  // one partial batch is fine without drop_last
  CHECK(partial.batches_per_epoch() == 1);
  Batch b;
  CHECK_THROWS_AS(partial.next(b), Error);  // next() before start_epoch()
}
