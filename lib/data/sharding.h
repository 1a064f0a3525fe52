// Which samples make up each batch of an epoch, and which rows of it each data-parallel rank
// gets. Pure functions of their arguments, so every rank computes the same split without talking.
#pragma once
#include <cstdint>  // int64_t, uint64_t
#include <vector>

namespace dtrain {

// A permutation of [0, size) drawn from (seed, epoch) by Fisher–Yates over the counter RNG;
// the identity when !shuffle.
std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch, bool shuffle);

struct RowRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Rank r of p's rows of a global batch of `rows` samples: [⌊rows·r/p⌋, ⌊rows·(r+1)/p⌋). For a full
// batch (rows divisible by p) that is [r·rows/p, (r+1)·rows/p), so the ranks' rows in rank order
// are exactly the 1-rank batch; for a smaller last batch a rank may get none.
RowRange rank_rows(int64_t rows, int rank, int world);

// Full batches only with drop_last, otherwise one more for the remainder.
int64_t count_batches(int64_t size, int64_t global_batch, bool drop_last);

}  // namespace dtrain
