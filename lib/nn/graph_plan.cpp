// Graph::plan_memory: every activation and activation gradient of a plan lives in one arena,
// at offsets chosen from their lifetimes (nn/memory_plan.h), so that a tensor's memory is reused
// once its last reader in forward and backward is done. Steps: the forward of node i is step i,
// its backward step 2n − i (n nodes), the caller's output gradient is written at step n, and
// the output and the input gradient stay alive to the end (2n + 1). The plan assumes every
// layer computes its gradients, so freezing layers later keeps it valid.
#include <algorithm>  // max, min
#include <climits>    // INT_MAX

#include "nn/graph.h"
#include "nn/graph_internal.h"  // Graph::Node
#include "nn/memory_plan.h"     // plan_arena

namespace dtrain {

// Node i overwrites its input 0 when the layer allows it and nothing else needs that input:
// the input has no other reader, is not the caller's tensor, not a view, and no backward pass
// reads it (its producer's, for a fused mask, or node i's).
bool Graph::runs_in_place(int i) const {
  const Node& node = nodes_[i];
  if (!node.layer || !node.layer->can_run_in_place() || node.layer->output_is_view()) return false;
  const Node& src = nodes_[node.inputs[0]];
  return node.inputs[0] != 0 && src.out_owner != 0 && !src.layer->output_is_view() &&
         src.consumers.size() == 1 && !src.layer->backward_reads_output() &&
         !node.layer->backward_reads_input(0);
}

void Graph::plan_memory() {
  const int n = static_cast<int>(nodes_.size());
  const int end = 2 * n + 1;
  auto backward_step = [n](int i) { return 2 * n - i; };
  std::vector<BufferLifetime> buffers;
  std::vector<int> act(n, -1), grad(n, -1);  // buffer of the nodes that own memory
  auto add = [&](const Node& node) {
    buffers.push_back(
        {node.shape.numel() * static_cast<int64_t>(dtype_size(node.dtype)), INT_MAX, -1});
    return static_cast<int>(buffers.size()) - 1;
  };
  for (int i = 1; i < n; ++i)
    if (nodes_[i].out_owner == i) act[i] = add(nodes_[i]);
  for (int i = 0; i < n; ++i)
    if (nodes_[i].grad_owner == i && (i > 0 || input_gradient_)) grad[i] = add(nodes_[i]);
  auto touch = [&](int b, int step) {
    buffers[b].first = std::min(buffers[b].first, step);
    buffers[b].last = std::max(buffers[b].last, step);
  };

  for (int i = 1; i < n; ++i) {
    const Node& node = nodes_[i];
    const int b = node.out_owner == 0 ? -1 : act[node.out_owner];
    if (b < 0) continue;  // a view of the caller's input
    if (!node.layer->output_is_view()) touch(b, i);
    for (auto [c, k] : node.consumers) {
      touch(b, c);
      if (nodes_[c].layer->backward_reads_input(k)) touch(b, backward_step(c));
    }
    if (node.layer->backward_reads_output()) touch(b, backward_step(i));
    if (i == n - 1) touch(b, end);
  }
  for (int i = 0; i < n; ++i) {
    const int b = grad[nodes_[i].grad_owner];
    if (b < 0) continue;
    for (auto [c, k] : nodes_[i].consumers) touch(b, backward_step(c));
    touch(b, i == 0 ? end : backward_step(i));
    if (i == n - 1) touch(b, n);
  }

  // A node may overwrite its output gradient when no node before it shares that buffer (one
  // that passes its gradient through and runs backward later) and it is not the caller's.
  for (int i = 1; i < n; ++i) {
    bool writable = i < n - 1;
    for (int j = 0; j < i && writable; ++j) writable = nodes_[j].grad_owner != nodes_[i].grad_owner;
    nodes_[i].layer->set_output_gradient_writable(writable);
  }

  constexpr int64_t kAlignment = 64;  // bytes: cache lines for the vector kernels
  const ArenaPlan plan = plan_arena(buffers, kAlignment);
  arena_ = backend_->empty({std::max<int64_t>(plan.size, 1)}, DType::u8);
  arena_bytes_ = plan.size;
  unshared_bytes_ = plan.unshared;
  for (int i = 0; i < n; ++i) {
    Node& node = nodes_[i];
    if (act[i] >= 0) node.out_buf = arena_.view_bytes(plan.offsets[act[i]], node.shape, node.dtype);
    if (grad[i] >= 0)
      node.grad_buf = arena_.view_bytes(plan.offsets[grad[i]], node.shape, node.dtype);
  }
}

}  // namespace dtrain
