// The CPU's reductions in double whose order depends on the size alone (dot, axpby_dot), so that
// equal inputs give equal bits on every rank, and whose loop still vectorises. The sum passes
// (backend/flat_pass.h) sum in the same order.
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

}  // namespace dtrain::cpu
