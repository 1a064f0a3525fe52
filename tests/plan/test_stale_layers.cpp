// SAPipe's stale-layer choice against hand-computed cases and brute force over k.
#include <doctest/doctest.h>

#include <algorithm>  // min
#include <random>

#include "plan/stale_layers.h"

using namespace dtrain;

namespace {

// The definition, checked k by k: the least k whose fresh communication fits (C2).
int brute_force_k(const std::vector<LayerCost>& layers) {
  const int m = static_cast<int>(layers.size());
  for (int k = 0; k <= m; ++k) {
    double fresh_comm = 0, backward = 0, stale_forward = 0;
    for (int i = k; i < m; ++i) fresh_comm += layers[i].comm_s;
    for (int i = 0; i < m - 1; ++i) backward += layers[i].backward_s;
    for (int i = 0; i < k; ++i) stale_forward += layers[i].forward_s;
    if (fresh_comm <= backward + stale_forward) return k;
  }
  return m;
}

std::vector<LayerCost> random_layers(std::mt19937& rng, int m, double comm_scale) {
  std::uniform_real_distribution<double> u(0.1, 1.0);
  std::vector<LayerCost> layers(static_cast<size_t>(m));
  for (LayerCost& l : layers) l = {u(rng), 2 * u(rng), comm_scale * u(rng)};
  return layers;
}

// Random profiles of 1..12 layers, each with its communication scaled slower and slower:
// `check(layers, scale, previous_k)` returns the k it found, passed on as previous_k.
template <class Check>
void over_slower_links(uint32_t seed, Check check) {
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    const auto base = random_layers(rng, 1 + trial % 12, 1.0);
    int previous = 0;
    for (double scale : {0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 6.0, 20.0}) {
      auto layers = base;
      for (LayerCost& l : layers) l.comm_s *= scale;
      previous = check(layers, scale, previous);
    }
  }
}

}  // namespace

TEST_CASE("stale layers: a hand-computed case") {
  // u = 1, b = 2 per layer; v = 1, 1, 4, 6. Σv = 12 ≤ Σb + Σu = 12: C1 holds.
  // C2 with Σ_{i<4} b = 6: k = 0: 12 > 6; k = 1: 11 > 7; k = 2: 10 > 8; k = 3: 6 ≤ 9.
  const std::vector<LayerCost> layers = {{1, 2, 1}, {1, 2, 1}, {1, 2, 4}, {1, 2, 6}};
  const StaleChoice c = choose_stale_layers(layers);
  CHECK(c.k == 3);
  CHECK_FALSE(c.communication_bound);
  CHECK(c.stall_s == 0);
  CHECK(stale_stall_seconds(layers, 2) == doctest::Approx(2));  // 10 − 8
  // Compute-bound and stall-free: the iteration is the compute, 12 s.
  CHECK(c.iteration_s == doctest::Approx(12));
  // k = 0: the whole communication after the backward of the last layer, 12 − 6 s exposed.
  CHECK(stale_iteration_seconds(layers, 0) == doctest::Approx(18));
}

TEST_CASE("stale layers: the scan equals brute force, and k grows with the communication") {
  over_slower_links(7, [](const std::vector<LayerCost>& layers, double, int previous) {
    const StaleChoice c = choose_stale_layers(layers);
    if (!c.communication_bound) CHECK(c.k == brute_force_k(layers));
    CHECK(c.k >= previous);  // slower communication never needs fewer stale layers
    return c.k;
  });
}

TEST_CASE("stale layers: communication shorter than backward needs none") {
  std::vector<LayerCost> layers = {{1, 2, 0.5}, {1, 2, 0.5}, {1, 2, 0.9}};
  CHECK(choose_stale_layers(layers).k == 0);
  CHECK(choose_stale_layers({}).k == 0);
}

TEST_CASE("stale layers: communication-bound, the least k of shortest predicted iteration") {
  // Σv = 30 > Σ(u + b) = 9. Stall = fresh comm − (Σ_{i<3} b = 4) − stale forward:
  // k = 0: 26, k = 1: 15, k = 2: 4, k = 3: 0.
  const std::vector<LayerCost> layers = {{1, 2, 10}, {1, 2, 10}, {1, 2, 10}};
  const StaleChoice c = choose_stale_layers(layers);
  CHECK(c.communication_bound);
  CHECK(c.k == 3);
  CHECK(c.iteration_s == doctest::Approx(30));
  double shortest = 1e300;
  for (int k = 0; k <= 3; ++k) shortest = std::min(shortest, stale_iteration_seconds(layers, k));
  CHECK(c.iteration_s == shortest);
  CHECK(stale_iteration_seconds(layers, 2) == doctest::Approx(34));
  // A layer whose communication is tiny adds nothing: the first k reaching zero stall wins.
  const std::vector<LayerCost> tail = {{1, 2, 10}, {1, 2, 10}, {1, 2, 0.001}};
  CHECK(choose_stale_layers(tail).k == 2);
}

TEST_CASE("stale layers: the fixed cost of a second all-reduce") {
  // u = 1, b = 2, v = 1, 1, 4, 6 as above; a = 0.5 per all-reduce.
  const std::vector<LayerCost> layers = {{1, 2, 1}, {1, 2, 1}, {1, 2, 4}, {1, 2, 6}};
  // C2 with the fresh all-reduce's fixed cost: k = 3: 6.5 ≤ 9. Two all-reduces: Σv + 1 = 13 > 12
  // = compute, so k = 3 costs 13; all stale is one all-reduce, 12.5: the better choice.
  CHECK(stale_comm_seconds(layers, 3, 0.5) == doctest::Approx(13));
  CHECK(stale_comm_seconds(layers, 4, 0.5) == doctest::Approx(12.5));
  CHECK(stale_iteration_seconds(layers, 3, 0.5) == doctest::Approx(13));
  const StaleChoice c = choose_stale_layers(layers, 0.5);
  CHECK(c.k == 4);
  CHECK(c.iteration_s == doctest::Approx(12.5));
  CHECK(c.communication_bound);
  // Communication-bound: Pipe-SGD's single all-reduce beats every split.
  const std::vector<LayerCost> slow = {{1, 2, 10}, {1, 2, 10}, {1, 2, 0.001}};
  CHECK(choose_stale_layers(slow, 0.1).k == 3);
  // Compute-bound with room: the least k whose fresh communication and its fixed cost fit.
  const std::vector<LayerCost> fast = {{1, 2, 0.5}, {1, 2, 0.5}, {1, 2, 3.8}};
  // Σ_{i<3} b = 4. Without a fixed cost: k = 0: 4.8 > 4; k = 1: 4.3 ≤ 4 + 1.
  CHECK(choose_stale_layers(fast, 0).k == 1);
  // With 0.8: k = 1: 4.3 + 0.8 > 5; k = 2: 3.8 + 0.8 ≤ 6, and 4.8 + 2·0.8 ≤ 9 still hides.
  CHECK(choose_stale_layers(fast, 0.8).k == 2);
  CHECK_FALSE(choose_stale_layers(fast, 0.8).communication_bound);
}

TEST_CASE("stale layers: with a fixed cost per all-reduce, k still grows with the communication") {
  over_slower_links(11, [](const std::vector<LayerCost>& layers, double scale, int previous) {
    const int m = static_cast<int>(layers.size());
    const int k = choose_stale_layers(layers, 0.05 * scale).k;
    CHECK(k >= previous);
    // Brute force: no k predicts a shorter iteration, and none before it as short.
    const double best = stale_iteration_seconds(layers, k, 0.05 * scale);
    for (int j = 0; j <= m; ++j) {
      CHECK(stale_iteration_seconds(layers, j, 0.05 * scale) >= best * (1 - 1e-12));
      if (j < k) CHECK(stale_iteration_seconds(layers, j, 0.05 * scale) > best);
    }
    return k;
  });
}

TEST_CASE("stale layers: a measured wait scales the communication and grows k") {
  // The hand-computed case above chose k = 3 (fresh v = 6 against a budget of 9). Had the
  // forward then waited 3 s per iteration at layer 4, the fresh sum took 9 + 3 = 12 s, twice the
  // predicted 6: every v doubles (Σv = 24 > the compute's 12) and k grows to the least of the
  // shortest predicted iteration, here all four layers.
  std::vector<LayerCost> layers = {{1, 2, 1}, {1, 2, 1}, {1, 2, 4}, {1, 2, 6}};
  double fixed = 0;
  CHECK(grow_stale_layers(layers, fixed, 3, 3.0) == 4);
  CHECK(layers[0].comm_s == doctest::Approx(2));
  CHECK(layers[3].comm_s == doctest::Approx(12));
  // From k = 0 with a small wait: fresh 12 against a budget of 6, waited 1: 6 + 1 = 7 < 12, so
  // the model had already foreseen more than that and nothing is scaled; k still grows by one
  // at least (the caller only asks when the wait mattered).
  layers = {{1, 2, 1}, {1, 2, 1}, {1, 2, 4}, {1, 2, 6}};
  CHECK(grow_stale_layers(layers, fixed, 0, 1.0) >= 1);
  CHECK(layers[3].comm_s == doctest::Approx(6));
  // Never past m, and the fixed cost scales with the rest.
  layers = {{1, 2, 1}, {1, 2, 1}};
  fixed = 0.5;
  CHECK(grow_stale_layers(layers, fixed, 1, 100.0) == 2);
  CHECK(fixed > 0.5);
  CHECK(grow_stale_layers(layers, fixed, 2, 1.0) == 2);
}
