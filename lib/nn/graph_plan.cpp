// Graph::plan_activations: every activation and activation gradient of a plan lives in one arena,
// at offsets chosen from their lifetimes (nn/memory_plan.h), so that a tensor's memory is reused
// once its last reader in forward and backward is done. Steps: the forward of node i is step i,
// then the caller's output gradient (step n, n nodes), then backward in reverse order, one step
// per node, and the output and the input gradient stay alive to the end. The plan assumes every
// layer computes its gradients, so freezing layers later keeps it valid.
//
// With recomputation (model.recompute: blocks) a block's interior activations — those written
// and read only by its own layers — are recomputed just before the block's backward: the
// schedule gets one step per re-run layer there, and such an activation has two spans, its
// block's forward and its recomputation to its backward. The memory between them serves the
// other blocks, so the blocks' interiors overlap in the arena and what stays for the whole step
// is each block's input. The same function plans materialize's arena and estimates it.
#include <algorithm>  // max, min, sort
#include <climits>    // INT_MAX

#include "nn/graph.h"
#include "nn/graph_internal.h"  // Graph::Node, MemoryNode, MemoryPlan
#include "nn/memory_plan.h"     // plan_arena

namespace dtrain {

namespace {
// A producer's readers (node, input slot) in the order their backward passes write its gradient:
// backward runs in reverse topological order, a node's slots in increasing order.
std::vector<std::pair<int, int>> in_backward_order(std::vector<std::pair<int, int>> edges) {
  std::sort(edges.begin(), edges.end(), [](auto a, auto b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  return edges;
}
}  // namespace

std::vector<Graph::MemoryNode> Graph::memory_nodes() const {
  std::vector<MemoryNode> out(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    out[i] = {
        node.layer.get(), node.inputs, node.consumers, node.shape,
        node.views,       node.dtype,  node.block_id,  node.layer ? node.layer->saved_bytes() : 0};
  }
  return out;
}

Graph::MemoryPlan Graph::plan_activations(const std::vector<MemoryNode>& nodes, bool input_gradient,
                                          bool recompute) {
  const int n = static_cast<int>(nodes.size());
  MemoryPlan m;
  auto view = [&](int i) { return nodes[i].layer && nodes[i].layer->output_is_view(); };

  // ---- outputs: views share their producer's memory; layers that can run in place overwrite
  // their input when nothing else needs it: the input has no other reader, is not the caller's
  // tensor, not a view, and no backward pass reads it (its producer's, for a fused mask, or
  // node i's).
  m.out_owner.assign(n, 0);
  for (int i = 1; i < n; ++i) {
    const MemoryNode& node = nodes[i];
    const Layer& layer = *node.layer;
    const int in = node.inputs.empty() ? 0 : node.inputs[0];
    const MemoryNode& src = nodes[in];
    const bool in_place = layer.can_run_in_place() && !layer.output_is_view() && in != 0 &&
                          m.out_owner[in] != 0 && !src.layer->output_is_view() &&
                          src.consumers.size() == 1 && !src.layer->backward_reads_output() &&
                          !layer.backward_reads_input(0);
    m.out_owner[i] = view(i) || in_place ? m.out_owner[in] : i;
  }

  // ---- gradients, from the output backwards: a producer whose only reader passes the gradient
  // through unchanged (Add, Flatten) shares that reader's buffer; otherwise the first reader to
  // run backward writes the producer's gradient and the others accumulate into it.
  m.grad_owner.assign(n, 0);
  m.routes.assign(n, {});
  for (int i = 1; i < n; ++i) m.routes[i].assign(nodes[i].inputs.size(), Route::write);
  for (int i = n; i-- > 0;) {
    m.grad_owner[i] = i;
    if (nodes[i].consumers.size() == 1) {
      auto [c, k] = nodes[i].consumers[0];
      if (nodes[c].layer->gradient_passes_through(k)) {
        m.grad_owner[i] = m.grad_owner[c];
        m.routes[c][k] = Route::shared;
      }
    }
  }
  for (const MemoryNode& producer : nodes) {
    if (producer.consumers.size() < 2) continue;
    const auto edges = in_backward_order(producer.consumers);
    for (size_t e = 1; e < edges.size(); ++e)
      m.routes[edges[e].first][edges[e].second] = Route::accumulate;
  }
  // A producer read by several layers (a ResNet block's output: the next block's convolution
  // and its shortcut) gets its gradient written by the reader that runs backward first and
  // accumulated by the others. When that first reader passes the gradient through (Add), the
  // producer may share its buffer instead of receiving a copy, provided every layer that reads
  // the buffer as its own gradient runs backward before the first accumulation changes it.
  // Once per buffer, highest producers first (backward order).
  std::vector<bool> taken(n, false);
  for (int p = n; p-- > 0;) {
    const MemoryNode& producer = nodes[p];
    if (producer.consumers.size() < 2 || m.grad_owner[p] != p) continue;
    const auto edges = in_backward_order(producer.consumers);
    auto [first, slot] = edges[0];
    const int owner = m.grad_owner[first];
    if (!nodes[first].layer->gradient_passes_through(slot) || taken[owner]) continue;
    int last_accumulator = -1, first_reader = INT_MAX;
    for (size_t e = 1; e < edges.size(); ++e)
      last_accumulator = std::max(last_accumulator, edges[e].first);
    for (int j = 0; j < n; ++j)
      if (m.grad_owner[j] == owner) first_reader = std::min(first_reader, j);
    if (first_reader <= last_accumulator) continue;
    for (int j = 0; j < n; ++j)
      if (m.grad_owner[j] == p) m.grad_owner[j] = owner;
    m.routes[first][slot] = Route::shared;
    taken[owner] = true;
  }
  // The accumulating readers' gradients go to scratch first: one slice per input, 64-byte
  // aligned, the largest node's worth.
  m.scratch_offset.assign(n, {});
  for (int i = 1; i < n; ++i) {
    const MemoryNode& node = nodes[i];
    m.scratch_offset[i].assign(node.inputs.size(), 0);
    int64_t used = 0;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (m.routes[i][k] != Route::accumulate) continue;
      m.scratch_offset[i][k] = used;
      const int64_t bytes =
          node.views[k].numel() * static_cast<int64_t>(dtype_size(nodes[node.inputs[k]].dtype));
      used += (bytes + 63) / 64 * 64;
    }
    m.scratch = std::max(m.scratch, used);
  }
  // A node may overwrite its output gradient when no node before it shares that buffer (one
  // that passes its gradient through and runs backward later) and it is not the caller's.
  m.gradient_writable.assign(n, false);
  for (int i = 1; i < n; ++i) {
    bool writable = i < n - 1;
    for (int j = 0; j < i && writable; ++j) writable = m.grad_owner[j] != m.grad_owner[i];
    m.gradient_writable[i] = writable;
  }

  // ---- recomputation: an activation is interior to a block when every node writing it and
  // every node reading it is in that block (not the graph's output); the block's nodes that
  // write interior activations run again before the block's backward, which starts at its
  // highest node.
  std::vector<bool> interior(n, recompute);
  for (int i = 1; i < n; ++i) {
    const int o = m.out_owner[i];
    if (o == 0 || nodes[o].block_id < 0 || nodes[i].block_id != nodes[o].block_id)
      interior[o] = false;
    for (auto [c, k] : nodes[i].consumers)
      if (nodes[c].block_id != nodes[o].block_id) interior[o] = false;
  }
  interior[0] = interior[n - 1] = false;
  int blocks = 0;
  for (const MemoryNode& node : nodes) blocks = std::max(blocks, node.block_id + 1);
  m.recompute_nodes.assign(recompute ? blocks : 0, {});
  m.recompute_at.assign(n, -1);
  std::vector<int> last_of(m.recompute_nodes.size(), -1);
  for (int i = 1; i < n; ++i) {
    if (!recompute || nodes[i].block_id < 0) continue;
    last_of[nodes[i].block_id] = i;
    if (!view(i) && interior[m.out_owner[i]]) m.recompute_nodes[nodes[i].block_id].push_back(i);
  }
  for (size_t b = 0; b < last_of.size(); ++b)
    if (!m.recompute_nodes[b].empty()) m.recompute_at[last_of[b]] = static_cast<int>(b);

  // ---- the schedule: forward steps, the output gradient, then backward with the blocks'
  // recomputations in it.
  std::vector<int> backward_step(n, 0), recompute_step(n, -1);
  int step = n;
  for (int i = n - 1; i >= 1; --i) {
    if (m.recompute_at[i] >= 0)
      for (int j : m.recompute_nodes[m.recompute_at[i]]) recompute_step[j] = ++step;
    backward_step[i] = ++step;
  }
  const int end = ++step;

  // ---- the buffers and their spans: steps before n are the forward's, after n the backward's.
  struct Span {
    int first = INT_MAX, last = -1;
    void touch(int s) { first = std::min(first, s), last = std::max(last, s); }
  };
  std::vector<BufferLifetime> buffers;
  std::vector<Span> forward_span, backward_span;
  std::vector<bool> recomputed;  // per buffer: an interior activation
  m.act.assign(n, -1);
  m.grad.assign(n, -1);
  auto add_bytes = [&](int64_t bytes, bool interior_activation) {
    buffers.push_back({bytes, 0, 0});
    forward_span.emplace_back();
    backward_span.emplace_back();
    recomputed.push_back(interior_activation);
    return static_cast<int>(buffers.size()) - 1;
  };
  auto add = [&](const MemoryNode& node, bool interior_activation) {
    return add_bytes(node.shape.numel() * static_cast<int64_t>(dtype_size(node.dtype)),
                     interior_activation);
  };
  for (int i = 1; i < n; ++i)
    if (m.out_owner[i] == i) m.act[i] = add(nodes[i], interior[i]);
  for (int i = 0; i < n; ++i)
    if (m.grad_owner[i] == i && (i > 0 || input_gradient)) m.grad[i] = add(nodes[i], false);
  // What a layer saves for its backward: from its forward to its backward, and like an interior
  // activation when its block's recomputation runs the layer again.
  m.saved.assign(n, -1);
  for (int i = 1; i < n; ++i)
    if (nodes[i].saved > 0) m.saved[i] = add_bytes(nodes[i].saved, recompute_step[i] >= 0);
  auto touch = [&](int b, int s) { (s < n ? forward_span : backward_span)[b].touch(s); };

  for (int i = 1; i < n; ++i) {
    const MemoryNode& node = nodes[i];
    const int b = m.out_owner[i] == 0 ? -1 : m.act[m.out_owner[i]];
    if (b < 0) continue;  // a view of the caller's input
    if (!view(i)) touch(b, i);
    if (recompute_step[i] >= 0) touch(b, recompute_step[i]);
    for (auto [c, k] : node.consumers) {
      touch(b, c);
      if (recompute_step[c] >= 0) touch(b, recompute_step[c]);
      if (nodes[c].layer->backward_reads_input(k)) touch(b, backward_step[c]);
    }
    if (node.layer->backward_reads_output()) touch(b, backward_step[i]);
    if (i == n - 1) touch(b, end);
  }
  for (int i = 1; i < n; ++i) {
    const int b = m.saved[i];
    if (b < 0) continue;
    touch(b, i);
    if (recompute_step[i] >= 0) touch(b, recompute_step[i]);
    touch(b, backward_step[i]);
  }
  for (int i = 0; i < n; ++i) {
    const int b = m.grad[m.grad_owner[i]];
    if (b < 0) continue;
    for (auto [c, k] : nodes[i].consumers) touch(b, backward_step[c]);
    touch(b, i == 0 ? end : backward_step[i]);
    if (i == n - 1) touch(b, n);
  }
  for (size_t b = 0; b < buffers.size(); ++b) {
    const Span& f = forward_span[b];
    const Span& k = backward_span[b];
    BufferLifetime& life = buffers[b];
    if (recomputed[b] && f.last >= 0 && k.last >= 0) {
      life.first = f.first, life.last = f.last;
      life.again_first = k.first, life.again_last = k.last;
    } else {
      life.first = std::min(f.first, k.first);
      life.last = std::max(f.last, k.last);
      if (life.last < 0) life.first = life.last = 0;  // never touched (cannot happen)
    }
  }
  constexpr int64_t kAlignment = 64;  // bytes: cache lines for the vector kernels
  m.arena = plan_arena(buffers, kAlignment);
  return m;
}

void Graph::apply_memory_plan(const MemoryPlan& m) {
  const int n = static_cast<int>(nodes_.size());
  for (int i = 0; i < n; ++i) {
    Node& node = nodes_[i];
    node.out_owner = m.out_owner[i];
    node.grad_owner = m.grad_owner[i];
    node.routes = m.routes[i];
    node.scratch_offset = m.scratch_offset[i];
    if (i > 0) node.layer->set_output_gradient_writable(m.gradient_writable[i]);
  }
  if (m.scratch > 0) scratch_ = backend_->empty({m.scratch}, DType::u8);
  arena_ = backend_->empty({std::max<int64_t>(m.arena.size, 1)}, DType::u8);
  arena_bytes_ = m.arena.size;
  unshared_bytes_ = m.arena.unshared;
  for (int i = 0; i < n; ++i) {
    Node& node = nodes_[i];
    if (m.act[i] >= 0)
      node.out_buf = arena_.view_bytes(m.arena.offsets[m.act[i]], node.shape, node.dtype);
    if (m.grad[i] >= 0)
      node.grad_buf = arena_.view_bytes(m.arena.offsets[m.grad[i]], node.shape, node.dtype);
    if (m.saved[i] >= 0)
      node.layer->bind_saved(
          arena_.view_bytes(m.arena.offsets[m.saved[i]], {node.layer->saved_bytes()}, DType::u8));
  }
  recompute_nodes_ = m.recompute_nodes;
  recompute_at_ = m.recompute_at;
}

}  // namespace dtrain
