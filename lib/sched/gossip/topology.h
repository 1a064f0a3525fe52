// The decentralized algorithms' communication graphs (AD-PSGD, D-PSGD): who a rank averages
// with, as pure functions of (topology, rank, ranks), so that every rank derives the same graph
// with no communication and no per-edge communicators.
//   ring         i ± 1
//   exponential  i ± h for the hops h ∈ {1} ∪ {2^k + 1 : k ≥ 1} below n. The AD-PSGD paper
//                writes "2^i + 1 hops, i from 0": i = 0 would be hop 2, which joins two ranks of
//                the same parity and breaks the bipartite split that keeps gossip deadlock-free,
//                so hop 1 takes its place.
//   complete     every other rank (D-PSGD only: the all-reduce average).
// With odd hops only, ring and exponential graphs on an even number of ranks are bipartite:
// odd ranks on one side (AD-PSGD's active ranks), even ranks on the other (its passive ones).
#pragma once
#include <string>
#include <vector>

namespace dtrain {

enum class Topology { ring, exponential, complete };

// "ring" | "exponential" | "complete" (the config's words).
Topology topology_named(const std::string& name);
// The hops of a ring-like topology on `ranks` ranks (complete: every hop).
std::vector<int> topology_hops(Topology topology, int ranks);
// The ranks `rank` exchanges models with: sorted, distinct, without `rank` itself.
std::vector<int> topology_neighbours(Topology topology, int rank, int ranks);
// D-PSGD's mixing matrix: W_ij = 1 / (degree + 1) for j a neighbour of i or i itself, else 0.
// The graphs are regular and symmetric, so W is symmetric and doubly stochastic.
std::vector<std::vector<double>> mixing_matrix(Topology topology, int ranks);

}  // namespace dtrain
