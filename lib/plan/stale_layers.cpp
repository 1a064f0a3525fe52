#include "plan/stale_layers.h"

#include <algorithm>  // max
#include <cstddef>

namespace dtrain {
namespace {

struct Sums {
  double forward = 0, backward = 0, comm = 0;
};

Sums totals(const std::vector<LayerCost>& layers, size_t begin, size_t end) {
  Sums s;
  for (size_t i = begin; i < end; ++i) {
    s.forward += layers[i].forward_s;
    s.backward += layers[i].backward_s;
    s.comm += layers[i].comm_s;
  }
  return s;
}

}  // namespace

double stale_stall_seconds(const std::vector<LayerCost>& layers, int k) {
  const size_t m = layers.size();
  if (m == 0) return 0;
  const Sums stale = totals(layers, 0, static_cast<size_t>(k));
  const Sums fresh = totals(layers, static_cast<size_t>(k), m);
  const double backward_before_last = totals(layers, 0, m - 1).backward;
  return std::max(0.0, fresh.comm - backward_before_last - stale.forward);
}

double stale_iteration_seconds(const std::vector<LayerCost>& layers, int k) {
  const Sums all = totals(layers, 0, layers.size());
  return std::max(all.forward + all.backward, all.comm) + stale_stall_seconds(layers, k);
}

StaleChoice choose_stale_layers(const std::vector<LayerCost>& layers) {
  const int m = static_cast<int>(layers.size());
  StaleChoice best;
  if (m == 0) return best;
  const Sums all = totals(layers, 0, layers.size());
  best.communication_bound = all.comm > all.backward + all.forward;
  // C2 by one scan: the fresh communication shrinks and the stale forward grows with k.
  const double budget = all.backward - layers.back().backward_s;
  double fresh_comm = all.comm, stale_forward = 0;
  int k = 0;
  while (k < m && fresh_comm > budget + stale_forward) {
    fresh_comm -= layers[k].comm_s;
    stale_forward += layers[k].forward_s;
    ++k;
  }
  best.k = k;
  best.iteration_s = stale_iteration_seconds(layers, k);
  best.stall_s = stale_stall_seconds(layers, k);
  return best;
}

}  // namespace dtrain
