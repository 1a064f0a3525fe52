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

double stale_stall_seconds(const std::vector<LayerCost>& layers, int k, double per_allreduce_s) {
  const size_t m = layers.size();
  if (static_cast<size_t>(k) >= m) return 0;
  const Sums stale = totals(layers, 0, static_cast<size_t>(k));
  const Sums fresh = totals(layers, static_cast<size_t>(k), m);
  const double backward_before_last = totals(layers, 0, m - 1).backward;
  return std::max(0.0, fresh.comm + per_allreduce_s - backward_before_last - stale.forward);
}

double stale_comm_seconds(const std::vector<LayerCost>& layers, int k, double per_allreduce_s) {
  const int m = static_cast<int>(layers.size());
  const int allreduces = k > 0 && k < m ? 2 : 1;
  return totals(layers, 0, layers.size()).comm + allreduces * per_allreduce_s;
}

double stale_iteration_seconds(const std::vector<LayerCost>& layers, int k,
                               double per_allreduce_s) {
  const Sums all = totals(layers, 0, layers.size());
  return std::max(all.forward + all.backward, stale_comm_seconds(layers, k, per_allreduce_s)) +
         stale_stall_seconds(layers, k, per_allreduce_s);
}

StaleChoice choose_stale_layers(const std::vector<LayerCost>& layers, double per_allreduce_s) {
  const int m = static_cast<int>(layers.size());
  StaleChoice best;
  if (m == 0) return best;
  // One scan over k: the fresh communication shrinks and the stale forward grows with k.
  const Sums all = totals(layers, 0, layers.size());
  const double compute = all.forward + all.backward;
  const double budget = all.backward - layers.back().backward_s;  // Σ_{i<m} b_i
  double fresh_comm = all.comm, stale_forward = 0;
  for (int k = 0; k <= m; ++k) {
    const double stall =
        k < m ? std::max(0.0, fresh_comm + per_allreduce_s - budget - stale_forward) : 0.0;
    const double comm = all.comm + (k > 0 && k < m ? 2 : 1) * per_allreduce_s;
    const double iteration = std::max(compute, comm) + stall;
    if (k == 0 || iteration < best.iteration_s) {
      best.k = k;
      best.iteration_s = iteration;
      best.stall_s = stall;
      best.communication_bound = comm > compute;
    }
    if (k < m) {
      fresh_comm -= layers[k].comm_s;
      stale_forward += layers[k].forward_s;
    }
  }
  return best;
}

int grow_stale_layers(std::vector<LayerCost>& layers, double& per_allreduce_s, int k,
                      double wait_s) {
  const int m = static_cast<int>(layers.size());
  if (k >= m) return m;
  double fresh = per_allreduce_s, budget = 0;  // C2's two sides for k
  for (int i = 0; i < m; ++i) {
    const LayerCost& l = layers[static_cast<size_t>(i)];
    if (i >= k) fresh += l.comm_s;
    if (i < m - 1) budget += l.backward_s;
    if (i < k) budget += l.forward_s;
  }
  const double scale = fresh > 0 ? std::max(1.0, (budget + wait_s) / fresh) : 1.0;
  for (LayerCost& l : layers) l.comm_s *= scale;
  per_allreduce_s *= scale;
  return std::min(m, std::max(k + 1, choose_stale_layers(layers, per_allreduce_s).k));
}

}  // namespace dtrain
