// Graph::assign_precision: which dtype each activation has when the model trains in bf16, and
// the casts between them. Each layer's row of the layer table says how it computes (layer_table.h
// Precision): the matrix products in bf16, the layers that follow their inputs in their inputs'
// dtype, the rest in f32. Going forward through the graph, a layer whose input arrives in
// another dtype than it reads gets a cast node before it (one per tensor and dtype, shared by
// every reader that needs it); the output is cast back to f32 for the loss. The graph input
// is f32 (a later pipeline stage's may be bf16, and its output stays as it is: use_precision). So a
// CNN's trunk runs in bf16 from its first convolution to its classifier with no cast between
// layers, and a transformer keeps its residual stream and layer norms in f32 with a cast before
// each product (PyTorch's autocast does the same casts, per op call).
#include <map>      // (tensor, dtype) → its cast
#include <utility>  // pair

#include "nn/graph.h"
#include "nn/graph_internal.h"  // Graph::Node
#include "nn/layer_table.h"     // find_layer_type: each layer's precision
#include "nn/layers/layers.h"   // make_cast

namespace dtrain {

namespace {
// The dtype a layer reads and writes given its inputs' dtypes.
DType layer_dtype(const Layer& layer, const std::vector<DType>& inputs, DType precision) {
  const LayerEntry* row = find_layer_type(std::string(layer.type()));
  DTRAIN_CHECK(row != nullptr) << "layer type '" << layer.type() << "' is not in the layer table";
  switch (row->precision) {
    case Precision::lowers:
      return precision;
    case Precision::f32:
      return DType::f32;
    case Precision::follows:
      for (DType d : inputs)
        if (d != inputs[0]) return DType::f32;  // mixed inputs promote, as PyTorch's do
      return inputs.empty() ? DType::f32 : inputs[0];
  }
  return DType::f32;
}

// The block of a cast (recomputation): its readers' when they share one (a cast into a block's
// matrix product is recomputed with it), else none.
template <class Nodes>
int cast_block(const Nodes& nodes, int cast) {
  int block = -2;
  for (auto [c, k] : nodes[cast].consumers) {
    if (block == -2) block = nodes[c].block_id;
    if (nodes[c].block_id != block) return -1;
  }
  return block < 0 ? -1 : block;
}
}  // namespace

std::map<std::string, DType> Graph::dtypes_under(DType precision) const {
  std::map<std::string, DType> dtypes{{kInputName, DType::f32}};
  std::vector<DType> of(nodes_.size(), DType::f32), in;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    in.clear();
    for (int src : nodes_[i].inputs) in.push_back(of[src]);
    of[i] = precision == DType::f32 ? DType::f32 : layer_dtype(*nodes_[i].layer, in, precision);
    dtypes[nodes_[i].name] = of[i];
  }
  return dtypes;
}

DType Graph::input_dtype() const {
  return nodes_.front().dtype;
}
DType Graph::output_dtype() const {
  return nodes_.back().dtype;
}

void Graph::assign_precision() {
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].stream = static_cast<int>(i);
  DTRAIN_CHECK(precision_ != DType::f32 || input_dtype_ == DType::f32)
      << "a bf16 input to an f32 graph";
  nodes_[0].dtype = input_dtype_;
  if (precision_ == DType::f32) return;
  std::vector<Node> old = std::move(nodes_);
  nodes_.clear();
  nodes_.reserve(2 * old.size());
  std::vector<int> moved(old.size(), 0);       // old index → new index
  std::map<std::pair<int, DType>, int> casts;  // (new producer, dtype) → its cast node
  auto cast_of = [&](int src, DType to) {
    auto [it, fresh] = casts.emplace(std::make_pair(src, to), static_cast<int>(nodes_.size()));
    if (!fresh) return it->second;
    Node cast;
    cast.name = nodes_[src].name + (to == DType::bf16 ? ".bf16" : ".f32");
    cast.layer = make_cast(to);
    cast.inputs = {src};
    cast.shape = nodes_[src].shape;
    cast.views = {nodes_[src].shape};
    cast.dtype = to;
    cast.stream = nodes_[src].stream;
    nodes_.push_back(std::move(cast));
    return it->second;
  };

  for (size_t i = 0; i < old.size(); ++i) {
    Node node = std::move(old[i]);
    node.consumers.clear();
    for (int& src : node.inputs) src = moved[src];
    if (node.tie >= 0) node.tie = moved[node.tie];
    if (i > 0) {
      std::vector<DType> in;
      for (int src : node.inputs) in.push_back(nodes_[src].dtype);
      node.dtype = layer_dtype(*node.layer, in, precision_);
      for (int& src : node.inputs)
        if (nodes_[src].dtype != node.dtype) src = cast_of(src, node.dtype);
      node.layer->set_dtype(node.dtype);
    }
    moved[i] = static_cast<int>(nodes_.size());
    nodes_.push_back(std::move(node));
  }
  if (f32_output_ && nodes_.back().dtype != DType::f32)
    cast_of(static_cast<int>(nodes_.size()) - 1, DType::f32);
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (size_t k = 0; k < nodes_[i].inputs.size(); ++k)
      nodes_[nodes_[i].inputs[k]].consumers.emplace_back(static_cast<int>(i), static_cast<int>(k));
  for (const auto& [key, cast] : casts) nodes_[cast].block_id = cast_block(nodes_, cast);
}

// assign_precision's walk on the planner's view of the nodes, without changing the graph: the
// same dtypes, the same casts at the same places (estimate_activation_bytes before materialize).
std::vector<Graph::MemoryNode> Graph::memory_nodes_under(
    DType precision, std::vector<std::unique_ptr<Layer>>& cast_layers) const {
  std::vector<MemoryNode> out;
  out.reserve(2 * nodes_.size());
  std::vector<int> moved(nodes_.size(), 0);
  std::map<std::pair<int, DType>, int> casts;
  auto cast_of = [&](int src, DType to) {
    auto [it, fresh] = casts.emplace(std::make_pair(src, to), static_cast<int>(out.size()));
    if (!fresh) return it->second;
    cast_layers.push_back(make_cast(to));
    out.push_back(
        {cast_layers.back().get(), {src}, {}, out[src].shape, {out[src].shape}, to, -1, 0});
    return it->second;
  };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    MemoryNode m{node.layer.get(),
                 node.inputs,
                 {},
                 node.shape,
                 node.views,
                 DType::f32,
                 node.block_id,
                 node.layer ? node.layer->saved_bytes() : 0};
    for (int& src : m.inputs) src = moved[src];
    if (i == 0) {
      m.dtype = input_dtype_;
    } else {
      std::vector<DType> in;
      for (int src : m.inputs) in.push_back(out[src].dtype);
      m.dtype = precision == DType::f32 ? DType::f32 : layer_dtype(*node.layer, in, precision);
      for (int& src : m.inputs)
        if (out[src].dtype != m.dtype) src = cast_of(src, m.dtype);
    }
    moved[i] = static_cast<int>(out.size());
    out.push_back(std::move(m));
  }
  if (precision != DType::f32 && f32_output_ && out.back().dtype != DType::f32)
    cast_of(static_cast<int>(out.size()) - 1, DType::f32);
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t k = 0; k < out[i].inputs.size(); ++k)
      out[out[i].inputs[k]].consumers.emplace_back(static_cast<int>(i), static_cast<int>(k));
  for (const auto& [key, cast] : casts) out[cast].block_id = cast_block(out, cast);
  return out;
}

}  // namespace dtrain
