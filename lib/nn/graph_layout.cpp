// Graph::choose_layouts: which activations live channel-blocked (ops.h ChannelBlock).
// Following oneDNN's advice on memory format propagation: the layouts are chosen once, at
// build, by the layers that compute (convolutions pick their output's) and propagate through
// the layers that run on any layout (Layer::LayoutRule::follows) as far as the chain goes; the
// layers that need plain data and the graph's input and output keep theirs plain. So a CNN's
// trunk stays blocked from its first convolution to the flatten before the classifier, with no
// reorder between layers.
#include <numeric>  // iota

#include "nn/graph.h"
#include "nn/graph_internal.h"  // Graph::Node

namespace dtrain {

namespace {
int find(std::vector<int>& parent, int i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}
// [N, C, 1, 1] tensors are the same bytes in every block that divides C.
bool single_pixel(const Shape& s) {
  return s.rank() == 4 && s[2] == 1 && s[3] == 1;
}
}  // namespace

void Graph::choose_layouts() {
  const int n = static_cast<int>(nodes_.size());
  // Chains: each `follows` layer shares its inputs' layout.
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (int i = 1; i < n; ++i)
    if (nodes_[i].layer->layout_rule() == Layer::LayoutRule::follows)
      for (int src : nodes_[i].inputs) parent[find(parent, i)] = find(parent, src);

  // A chain is blocked when the layers that start it want the same block and nothing in it
  // needs plain data: the graph input and output, a reader that takes plain data only, a shape
  // the block does not divide.
  constexpr ChannelBlock kUndecided = 0, kPlain = -1;
  std::vector<ChannelBlock> want(n, blocked_layouts_ ? kUndecided : kPlain);
  auto veto = [&](int i) { want[find(parent, i)] = kPlain; };
  veto(0);
  veto(n - 1);
  for (int i = 1; i < n; ++i) {
    const Node& node = nodes_[i];
    if (node.layer->layout_rule() == Layer::LayoutRule::chooses) {
      ChannelBlock& w = want[find(parent, i)];
      const ChannelBlock b = node.layer->preferred_output_block(*backend_);
      if (w == kUndecided) w = b;
      if (w != b) w = kPlain;
    }
    for (auto [c, k] : node.consumers)
      if (nodes_[c].layer->layout_rule() == Layer::LayoutRule::plain && !single_pixel(node.shape))
        veto(i);
  }
  for (int i = 1; i < n; ++i) {
    const ChannelBlock w = want[find(parent, i)];
    const Shape& s = nodes_[i].shape;
    if (w > 1 && (s.rank() != 4 || s[1] % w != 0)) veto(i);
  }
  for (int i = 0; i < n; ++i) nodes_[i].block = std::max<ChannelBlock>(want[find(parent, i)], 1);

  std::vector<ChannelBlock> in;
  for (int i = 1; i < n; ++i) {
    in.clear();
    for (int src : nodes_[i].inputs) in.push_back(nodes_[src].block);
    nodes_[i].layer->set_layouts(in, nodes_[i].block);
  }
}

}  // namespace dtrain
