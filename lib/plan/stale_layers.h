// SAPipe's choice of stale layers (Chen et al., NeurIPS 2022, §3.1): the first k layers of the
// model train on the gradient of iteration t − 2, the others on that of t − 1. From a profile of
// each layer's forward time u_i, backward time b_i and the communication time v_i of its
// gradient, pick the least k for which the pipeline does not stall:
//   C1  Σ v_i ≤ Σ b_i + Σ u_i                  (communication fits in the iteration at all)
//   C2  Σ_{i>k} v_i ≤ Σ_{i<m} b_i + Σ_{i≤k} u_i (the fresh layers' gradients are all-reduced
//                                                before the next forward reaches layer k + 1)
// The predicted iteration is the paper's: max(Σ(u + b), Σv) plus C2's shortfall (the next
// forward waits at layer k + 1 for that long), and the least k of shortest predicted iteration
// wins: when C1 and C2 can hold, that is the least k for which they do; when nothing hides the
// communication, more staleness than needed buys no time and is not taken. One prefix-sum scan
// evaluates every k.
//
// One addition to the paper's model: with 0 < k < m the gradient travels as two all-reduces
// (the fresh layers', then the stale prefix's), and each all-reduce has a fixed cost (latency,
// hand-offs) that the per-layer v_i do not show. `per_allreduce_s` adds it: to the fresh
// communication in C2, and once more to Σv when the split makes two. When communication is the
// bound, that extra cost makes k = m (Pipe-SGD) faster than any split, and so it is chosen.
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
  bool communication_bound = false;  // C1 fails for the chosen k
};

// C2's shortfall for k stale layers: max(0, Σ_{i>k} v_i + a − Σ_{i<m} b_i − Σ_{i≤k} u_i) for
// k < m (a = per_allreduce_s), 0 for k = m.
double stale_stall_seconds(const std::vector<LayerCost>& layers, int k, double per_allreduce_s = 0);

// The communication of one iteration: Σv plus the fixed cost of one all-reduce, or of two
// when 0 < k < m.
double stale_comm_seconds(const std::vector<LayerCost>& layers, int k, double per_allreduce_s = 0);

// The predicted iteration with k stale layers: max(Σ(u + b), stale_comm_seconds) + the stall.
double stale_iteration_seconds(const std::vector<LayerCost>& layers, int k,
                               double per_allreduce_s = 0);

// The least k of shortest predicted iteration (with C1 and C2 holding, the least k for which
// they do). An empty profile: k = 0.
StaleChoice choose_stale_layers(const std::vector<LayerCost>& layers, double per_allreduce_s = 0);

// `auto`'s correction after measuring (SAPipe's scheduler): with k stale layers the next forward
// waited `wait_s` per iteration at layer k + 1 for the fresh layers' sum, where the model above
// predicted its own stall. The fresh communication took its C2 budget plus that wait; every v_i
// and the fixed cost are scaled by the ratio of that to the predicted fresh communication (never
// down), in place, and k is chosen anew from the scaled profile — at least k + 1, at most m.
// The model's two blind spots are both in what is measured: with one segment the fresh layers'
// all-reduce starts only after layer k + 1's backward, and on shared cores it runs slower
// beside the computation than alone.
int grow_stale_layers(std::vector<LayerCost>& layers, double& per_allreduce_s, int k,
                      double wait_s);

}  // namespace dtrain
