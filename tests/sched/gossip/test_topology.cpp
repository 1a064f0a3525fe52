// The decentralized topologies: symmetric, regular, connected, bipartite by parity (ring and
// exponential on an even number of ranks: AD-PSGD's deadlock freedom), and D-PSGD's W symmetric
// and doubly stochastic.
#include <doctest/doctest.h>

#include <algorithm>
#include <queue>

#include "sched/gossip/topology.h"

using namespace dtrain;

namespace {
bool connected(Topology t, int n) {
  std::vector<bool> seen(n, false);
  std::queue<int> todo;
  todo.push(0);
  seen[0] = true;
  while (!todo.empty()) {
    const int i = todo.front();
    todo.pop();
    for (int j : topology_neighbours(t, i, n))
      if (!seen[j]) seen[j] = true, todo.push(j);
  }
  return std::all_of(seen.begin(), seen.end(), [](bool s) { return s; });
}
}  // namespace

TEST_CASE("hops and neighbours of each topology") {
  CHECK(topology_hops(Topology::ring, 8) == std::vector<int>{1});
  CHECK(topology_hops(Topology::exponential, 8) == std::vector<int>{1, 3, 5});
  CHECK(topology_hops(Topology::exponential, 16) == std::vector<int>{1, 3, 5, 9});
  CHECK(topology_hops(Topology::exponential, 1).empty());
  CHECK(topology_neighbours(Topology::ring, 0, 6) == std::vector<int>{1, 5});
  CHECK(topology_neighbours(Topology::ring, 1, 2) == std::vector<int>{0});
  CHECK(topology_neighbours(Topology::exponential, 0, 8) == std::vector<int>{1, 3, 5, 7});
  CHECK(topology_neighbours(Topology::exponential, 2, 16) ==
        std::vector<int>{1, 3, 5, 7, 9, 11, 13, 15});
  CHECK(topology_neighbours(Topology::complete, 2, 4) == std::vector<int>{0, 1, 3});
  CHECK(topology_neighbours(Topology::ring, 0, 1).empty());
  CHECK(topology_named("exponential") == Topology::exponential);
  CHECK_THROWS(topology_named("star"));
}

TEST_CASE(
    "every topology is symmetric, regular and connected; ring and exponential are "
    "bipartite by parity on an even number of ranks") {
  for (Topology t : {Topology::ring, Topology::exponential, Topology::complete}) {
    for (int n = 2; n <= 20; ++n) {
      CAPTURE(static_cast<int>(t));
      CAPTURE(n);
      const size_t degree = topology_neighbours(t, 0, n).size();
      for (int i = 0; i < n; ++i) {
        const std::vector<int> mine = topology_neighbours(t, i, n);
        CHECK(mine.size() == degree);
        for (int j : mine) {
          const std::vector<int> theirs = topology_neighbours(t, j, n);
          CHECK(std::count(theirs.begin(), theirs.end(), i) == 1);
          if (t != Topology::complete && n % 2 == 0) CHECK((i + j) % 2 == 1);
        }
      }
      CHECK(connected(t, n));
    }
  }
  // An odd ring is not bipartite: 0 – 1 – 2 – 0.
  CHECK(topology_neighbours(Topology::ring, 0, 3) == std::vector<int>{1, 2});
}

TEST_CASE("W is symmetric and doubly stochastic with uniform weights 1/(degree + 1)") {
  for (Topology t : {Topology::ring, Topology::exponential, Topology::complete}) {
    for (int n = 1; n <= 17; ++n) {
      const auto w = mixing_matrix(t, n);
      for (int i = 0; i < n; ++i) {
        double row = 0, column = 0;
        for (int j = 0; j < n; ++j) {
          CHECK(w[i][j] == w[j][i]);
          row += w[i][j];
          column += w[j][i];
        }
        CHECK(row == doctest::Approx(1.0));
        CHECK(column == doctest::Approx(1.0));
        CHECK(w[i][i] == doctest::Approx(1.0 / (topology_neighbours(t, i, n).size() + 1)));
      }
    }
  }
  const auto ring = mixing_matrix(Topology::ring, 4);
  CHECK(ring[0] == std::vector<double>{1.0 / 3, 1.0 / 3, 0.0, 1.0 / 3});
}
