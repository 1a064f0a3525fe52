// The CPU's reductions in double whose order depends on the size alone (dot, SAPipe's gᵀΔ), so
// that equal inputs give equal bits on every rank, and whose loop still vectorises.
#pragma once
#include <algorithm>  // min
#include <cstdint>    // int64_t

namespace dtrain::cpu {

// Σ term(i) over [0, n) in eight running sums (element i into sum i mod 8), then added in order.
// `term` returns element i's double contribution (and may write element i).
template <typename Term>
double lane_ordered_sum(int64_t n, Term term) {
  constexpr int kLanes = 8;
  double sum[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) sum[l] += term(i + l);
  for (int l = 0; i < n; ++i, ++l) sum[l] += term(i);
  double total = 0;
  for (double s : sum) total += s;
  return total;
}

// Σ y[i]·z[i] over [0, n) in lane_ordered_sum's order, where a pass produces y and z a block at a
// time: produce(begin, count, z_block) writes y[begin, begin + count) and z_block[0, count). The
// block stays in the first-level cache between being produced and being summed, so the pass and
// its dot cost one trip through memory, and z (SAPipe's Δ) is never written out. The producing
// loop is a plain simd loop, like the loops whose bits it must repeat: a scalar element inside a
// vector loop may contract into FMAs differently.
template <typename Produce>
double produced_dot(int64_t n, const float* y, Produce produce) {
  constexpr int kLanes = 8;
  constexpr int64_t kBlock = 2048;  // a multiple of the lanes: the order is lane_ordered_sum's
  alignas(64) float z[kBlock];
  double sum[kLanes] = {};
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t count = std::min(kBlock, n - begin);
    produce(begin, count, z);
    const float* yb = y + begin;
    int64_t i = 0;
    for (; i + kLanes <= count; i += kLanes)
      for (int l = 0; l < kLanes; ++l)
        sum[l] += static_cast<double>(yb[i + l]) * static_cast<double>(z[i + l]);
    for (int l = 0; i < count; ++i, ++l)  // the last block's tail only
      sum[l] += static_cast<double>(yb[i]) * static_cast<double>(z[i]);
  }
  double total = 0;
  for (double s : sum) total += s;
  return total;
}

}  // namespace dtrain::cpu
