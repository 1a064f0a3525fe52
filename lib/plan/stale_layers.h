// SAPipe's choice of stale layers (Chen et al., NeurIPS 2022, §3.1): the first k layers of the
// model train on the gradient of iteration t − 2, the others on that of t − 1. From a profile of
// each layer's forward time u_i, backward time b_i and the communication time v_i of its
// gradient, pick the least k for which the pipeline does not stall:
//   C1  Σ v_i ≤ Σ b_i + Σ u_i                  (communication fits in the iteration at all)
//   C2  Σ_{i>k} v_i ≤ Σ_{i<m} b_i + Σ_{i≤k} u_i (the fresh layers' gradients are all-reduced
//                                                before the next forward reaches layer k + 1)
// C2 only gets easier as k grows, so one prefix-sum scan finds the least k. The predicted
// iteration is the paper's: max(Σ(u + b), Σv) plus C2's shortfall (the next forward waits at
// layer k + 1 for that long). When C1 fails no k hides the communication, and that prediction
// is shortest from the same least k on: more staleness would buy no time.
//
// The paper's model adds the stall to a communication-bound iteration; in a real steady state
// the comm thread is then busy anyway, and fewer stale layers can cost nothing (once the stale
// layers' communication outlasts the fresh layers' compute). Taking that into account would
// make k fall as the link gets slower past C1, which the paper's choice never does; we keep
// the paper's choice.
#pragma once
#include <vector>

namespace dtrain {

struct LayerCost {
  double forward_s = 0, backward_s = 0, comm_s = 0;  // u_i, b_i, v_i
};

struct StaleChoice {
  int k = 0;               // stale layers: the first k
  double iteration_s = 0;  // predicted iteration with that k
  double stall_s = 0;      // C2's shortfall: how long the next forward waits at layer k + 1
  bool communication_bound = false;  // C1 fails
};

// C2's shortfall for k stale layers: max(0, Σ_{i>k} v_i − Σ_{i<m} b_i − Σ_{i≤k} u_i).
double stale_stall_seconds(const std::vector<LayerCost>& layers, int k);

// The predicted iteration with k stale layers: max(Σ(u + b), Σv) + stale_stall_seconds.
double stale_iteration_seconds(const std::vector<LayerCost>& layers, int k);

// The least k that satisfies C2 (and so, with C1, does not stall). An empty profile: k = 0.
StaleChoice choose_stale_layers(const std::vector<LayerCost>& layers);

}  // namespace dtrain
