#include "sched/gossip/topology.h"

#include <algorithm>  // sort, unique

#include "core/error.h"

namespace dtrain {

Topology topology_named(const std::string& name) {
  if (name == "ring") return Topology::ring;
  if (name == "exponential") return Topology::exponential;
  if (name == "complete") return Topology::complete;
  throw InputError("algorithm.topology: unknown topology '" + name + "'");
}

std::vector<int> topology_hops(Topology topology, int ranks) {
  std::vector<int> hops;
  if (ranks < 2) return hops;
  switch (topology) {
    case Topology::ring:
      hops.push_back(1);
      break;
    case Topology::exponential:
      hops.push_back(1);
      for (long h = 3; h < ranks; h = 2 * (h - 1) + 1) hops.push_back(static_cast<int>(h));
      break;
    case Topology::complete:
      for (int h = 1; h < ranks; ++h) hops.push_back(h);
      break;
  }
  return hops;
}

std::vector<int> topology_neighbours(Topology topology, int rank, int ranks) {
  DTRAIN_CHECK(rank >= 0 && rank < ranks) << "rank " << rank << " of " << ranks;
  std::vector<int> out;
  for (int h : topology_hops(topology, ranks)) {
    out.push_back((rank + h) % ranks);
    out.push_back(((rank - h) % ranks + ranks) % ranks);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  out.erase(std::remove(out.begin(), out.end(), rank), out.end());
  return out;
}

std::vector<std::vector<double>> mixing_matrix(Topology topology, int ranks) {
  std::vector<std::vector<double>> w(ranks, std::vector<double>(ranks, 0.0));
  for (int i = 0; i < ranks; ++i) {
    const std::vector<int> n = topology_neighbours(topology, i, ranks);
    const double weight = 1.0 / static_cast<double>(n.size() + 1);
    w[i][i] = weight;
    for (int j : n) w[i][j] = weight;
  }
  return w;
}

}  // namespace dtrain
