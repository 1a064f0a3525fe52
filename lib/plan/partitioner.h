// PipeDream's partitioner (Harlap et al., 2018, §3.2): from a per-layer profile of the model's
// partitionable chain, the split into stages, the replicas of each stage and NOAM that minimise
// the time per minibatch of the slowest stage, by the dynamic program
//   A(j, m) = min( T(1→j, m),  min_{i<j, m'<m} max(A(i, m − m'), [2·C_i], T(i+1→j, m')) )
// over layers 1..j and m machines, backtracked to the partition. Two published costs:
//  - paper:   T(i→j, m) = (1/m)·max(Σ T_l, Σ W_l^m), W_l^m = 4(m − 1)·w_l / (m·B), and the
//             activations and gradients between stages, 2·C_i = 2·a_i / B, a term of the max;
//  - runtime: the public PipeDream optimizer (optimizer_graph_hierarchical.py, which the public
//             runtime's configurations come from): T(i→j, m) = (Σ T_l + 4(m − 1)·Σ w_l / (B·m)) / m
//             — compute and weight synchronisation add up — and no activation term (that
//             optimizer without --activation_compression_ratio).
// Ties (times within PartitionProblem::tie_tolerance, relative) go to fewer stages, then to fewer
// activation bytes across the cuts, then to the first candidate in (cut, replicas) order:
// deterministic. Pure functions,
// no I/O; O(N²M²) for N layers and M machines.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// One element of the partitionable chain: the layers from one valid cut point to the next.
struct LayerProfile {
  std::string name;  // its first layer: `stages:` names it to start a stage there
  double forward_s = 0, backward_s = 0;  // per minibatch of the profiled size
  double activation_bytes = 0;           // its output for that minibatch (= the gradient back)
  double parameter_bytes = 0;
  double compute_s() const { return forward_s + backward_s; }
};

enum class PartitionCost { paper, runtime };
PartitionCost partition_cost_named(const std::string& name);  // "paper" | "runtime"
const char* partition_cost_name(PartitionCost cost);

struct PartitionProblem {
  std::vector<LayerProfile> layers;
  int machines = 1;
  double bandwidth_bytes_per_s = 1e9;  // B
  PartitionCost cost = PartitionCost::runtime;
  // Times within this relative distance tie (and the tie-breaks decide). Measured profiles are
  // good to about a percent: a job's planner ties within 1 %, so that of two partitions the
  // profile cannot tell apart, the one with fewer stages, then less traffic at its cuts, wins.
  double tie_tolerance = 1e-9;
};

struct Partition {
  std::vector<int> first_layer;  // index of each stage's first layer; first_layer[0] == 0
  std::vector<int> replicas;     // per stage, summing to the machines
  // Per stage: its time per minibatch, and the compute and weight-synchronisation parts of it
  // (each already divided by the replicas).
  std::vector<double> stage_s, stage_compute_s, stage_sync_s;
  std::vector<double> boundary_s;  // paper: 2·C at each cut (stages − 1); runtime: zeros
  double time_s = 0;               // the pipeline's time per minibatch: the largest of the above
  int noam = 1;                    // ⌈machines / replicas of the input stage⌉

  int stages() const { return static_cast<int>(replicas.size()); }
  int machines() const;
  std::string configuration() const;  // "3-1": replicas per stage
  // The first layer of stage 2, 3, ... (what `algorithm.stages` lists).
  std::vector<std::string> starts(const std::vector<LayerProfile>& layers) const;
  // What the slowest part is: "compute" or "communication" (weight sync or activations).
  bool compute_bound() const;
  // One line per stage and cut: its layers, replicas and times, the slowest marked.
  std::string describe(const std::vector<LayerProfile>& layers) const;
};

// A given partition's times under the problem's cost (the partition is not checked for
// optimality; it must cover the layers in order with at least one replica per stage).
Partition evaluate_partition(const PartitionProblem& problem, std::vector<int> first_layer,
                             std::vector<int> replicas);

// The dynamic program: the best partition of all the layers over all the machines.
Partition best_partition(const PartitionProblem& problem);
// The best replicas for stages that start at `first_layer` (summing to the machines; needs
// machines >= stages).
Partition best_replicas(const PartitionProblem& problem, const std::vector<int>& first_layer);
// The best cuts for stages with these replicas (one stage per entry; needs layers >= stages).
Partition best_cuts(const PartitionProblem& problem, const std::vector<int>& replicas);

}  // namespace dtrain
