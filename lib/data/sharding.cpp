#include "data/sharding.h"

#include <numeric>  // iota
#include <utility>  // swap

#include "core/rng.h"  // random_bits, stream_id: the same permutation on every rank

namespace dtrain {

std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch, bool shuffle) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  const uint64_t stream = stream_id(RngStream::shuffle, static_cast<uint64_t>(epoch));
  for (int64_t i = size - 1; i > 0; --i) {
    // Modulo bias is below size / 2^64: immaterial for any dataset.
    const uint64_t j =
        random_bits(seed, stream, static_cast<uint64_t>(i)) % static_cast<uint64_t>(i + 1);
    std::swap(order[i], order[j]);
  }
  return order;
}

RowRange rank_rows(int64_t rows, int rank, int world) {
  return {rows * rank / world, rows * (rank + 1) / world};
}

int64_t count_batches(int64_t size, int64_t global_batch, bool drop_last) {
  return drop_last ? size / global_batch : (size + global_batch - 1) / global_batch;
}

}  // namespace dtrain
