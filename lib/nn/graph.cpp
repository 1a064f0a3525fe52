// Graph construction: names, topological order, shape inference, parameter layout, summary.
#include "nn/graph.h"

#include <fmt/format.h>  // summary table

#include <algorithm>  // find
#include <map>        // name → node lookups at build time
#include <queue>      // priority_queue: stable topological sort

#include "nn/graph_internal.h"  // Graph::Node

namespace dtrain {

Graph::Graph(std::vector<GraphNode> specs, const Shape& input_shape, bool fuse_relus) {
  DTRAIN_INPUT_CHECK(!specs.empty()) << "model: the layer list is empty";
  DTRAIN_INPUT_CHECK(input_shape.rank() >= 2 && input_shape.numel() > 0)
      << "model: bad input shape " << input_shape.str();
  // ---- names and producers (indices into `specs`, -1 = graph input) ----
  const int n = static_cast<int>(specs.size());
  std::map<std::string, int> index;
  for (int i = 0; i < n; ++i) {
    const std::string& name = specs[i].name;
    DTRAIN_INPUT_CHECK(!name.empty()) << "model: layer " << i << " has no name";
    DTRAIN_INPUT_CHECK(name != kInputName)
        << "model: '" << name << "' is reserved for the model input; rename layer " << i;
    DTRAIN_INPUT_CHECK(specs[i].layer != nullptr) << "model: layer '" << name << "' has no type";
    DTRAIN_INPUT_CHECK(index.emplace(name, i).second)
        << "model: two layers are named '" << name << "'";
  }
  std::vector<std::vector<int>> producers(n);
  for (int i = 0; i < n; ++i) {
    const GraphNode& s = specs[i];
    if (s.inputs.empty()) {
      producers[i].push_back(i - 1);
    } else {
      for (const std::string& in : s.inputs) {
        if (in == kInputName) {
          producers[i].push_back(-1);
          continue;
        }
        auto it = index.find(in);
        DTRAIN_INPUT_CHECK(it != index.end())
            << "layer '" << s.name << "' reads '" << in << "', which is not a layer of the model";
        DTRAIN_INPUT_CHECK(it->second != i) << "layer '" << s.name << "' reads itself";
        producers[i].push_back(it->second);
      }
    }
    DTRAIN_INPUT_CHECK(static_cast<int>(producers[i].size()) == s.layer->num_inputs())
        << "layer '" << s.name << "' (" << s.layer->type() << ") takes " << s.layer->num_inputs()
        << " input" << (s.layer->num_inputs() == 1 ? "" : "s") << " but is given "
        << producers[i].size();
  }
  // ---- topological order (Kahn; ties keep the list order) ----
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> readers(n);
  for (int i = 0; i < n; ++i)
    for (int p : producers[i])
      if (p >= 0) ++pending[i], readers[p].push_back(i);
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int r : readers[i])
      if (--pending[r] == 0) ready.push(r);
  }
  if (static_cast<int>(order.size()) != n) {
    std::string cycle;
    for (int i = 0; i < n; ++i)
      if (pending[i] > 0) cycle += (cycle.empty() ? "'" : ", '") + specs[i].name + "'";
    throw InputError("model: the layers " + cycle + " read each other in a cycle");
  }
  // ---- the output and unused layers ----
  const int last = n - 1;
  DTRAIN_INPUT_CHECK(readers[last].empty())
      << "model: the last layer '" << specs[last].name << "' is the output, but '"
      << specs[readers[last][0]].name << "' reads it";
  for (int i = 0; i < last; ++i)
    DTRAIN_INPUT_CHECK(!readers[i].empty())
        << "model: layer '" << specs[i].name
        << "' is not read by any layer (only the last layer is an output)";

  // ---- nodes in topological order; node 0 is the input ----
  std::vector<int> position(n);
  nodes_.resize(n + 1);
  nodes_[0].name = kInputName;
  nodes_[0].shape = input_shape;
  for (int t = 0; t < n; ++t) {
    position[order[t]] = t + 1;
    Node& node = nodes_[t + 1];
    node.name = specs[order[t]].name;
    node.layer = std::move(specs[order[t]].layer);
    const std::string& block = specs[order[t]].block;
    if (block.empty()) continue;
    const auto known = std::find(block_names_.begin(), block_names_.end(), block);
    node.block_id = static_cast<int>(known - block_names_.begin());
    if (known == block_names_.end()) block_names_.push_back(block);
  }
  bool input_read = false;
  for (int t = 0; t < n; ++t) {
    Node& node = nodes_[t + 1];
    for (int p : producers[order[t]]) {
      const int src = p < 0 ? 0 : position[p];
      input_read |= src == 0;
      node.inputs.push_back(src);
      nodes_[src].consumers.emplace_back(t + 1, static_cast<int>(node.inputs.size()) - 1);
    }
  }
  DTRAIN_INPUT_CHECK(input_read) << "model: no layer reads the model input";

  // ---- shapes, parameters, FLOPs ----
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    std::vector<InputInfo> info;
    for (int src : node.inputs) info.push_back({nodes_[src].name, nodes_[src].shape});
    node.shape = node.layer->infer(node.name, info);
    for (size_t k = 0; k < node.inputs.size(); ++k)
      node.views.push_back(node.layer->input_view(static_cast<int>(k), info[k].shape));
    node.params = node.layer->params();
    node.buffers = node.layer->buffers();
    node.param_offset = num_params_;
    for (const ParamDecl& p : node.params) node.param_count += p.shape.numel();
    node.buffer_offset = num_buffers_;
    for (const ParamDecl& b : node.buffers) num_buffers_ += b.shape.numel();
    if (node.param_count > 0) {
      node.range = static_cast<int>(ranges_.size());
      ranges_.push_back(
          {node.name, std::string(node.layer->type()), num_params_, node.param_count});
      num_params_ += node.param_count;
    }
    node.flops = node.layer->flops();
  }
  resolve_ties();
  if (fuse_relus) fuse_activations();
}

// A layer that computes with an earlier layer's weight (a tied output head): the lender must
// come before it in forward order (so its backward, which runs later, adds to the gradient the
// borrower wrote), lend that weight and have its shape; each lender lends once.
void Graph::resolve_ties() {
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    const std::optional<Layer::WeightTie> tie = node.layer->weight_tie();
    if (!tie) continue;
    const std::string at =
        "model: layer '" + node.name + "' (" + tie->key + ": '" + tie->layer + "')";
    size_t lender = 0;
    for (size_t j = 1; j < nodes_.size(); ++j)
      if (nodes_[j].name == tie->layer) lender = j;
    DTRAIN_INPUT_CHECK(lender > 0) << at << ": no layer of the model has that name";
    const Node& from = nodes_[lender];
    DTRAIN_INPUT_CHECK(from.layer->lends_weight() && !from.params.empty())
        << at << ": '" << from.name << "' is a " << from.layer->type()
        << ", which has no weight to lend (tie to an embedding)";
    DTRAIN_INPUT_CHECK(lender < i)
        << at << ": '" << from.name << "' runs after it; the embedding must come first";
    DTRAIN_INPUT_CHECK(from.params[0].shape == tie->shape)
        << at << ": its weight is " << tie->shape.str() << " but '" << from.name << "' has "
        << from.params[0].shape.str();
    for (size_t j = 1; j < i; ++j)
      DTRAIN_INPUT_CHECK(nodes_[j].tie != static_cast<int>(lender))
          << at << ": '" << nodes_[j].name << "' already uses that weight";
    node.tie = static_cast<int>(lender);
    nodes_[lender].layer->set_weight_gradient_accumulates();
  }
}

std::vector<WeightSlot> Graph::weight_slots() const {
  std::vector<WeightSlot> slots;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    int64_t offset = node.param_offset;
    for (const ParamDecl& d : node.params) {
      slots.push_back({node.name + "." + d.name, d.shape, false, offset, {}});
      offset += d.shape.numel();
    }
    offset = node.buffer_offset;
    for (const ParamDecl& d : node.buffers) {
      slots.push_back({node.name + "." + d.name, d.shape, true, offset, {}});
      offset += d.shape.numel();
    }
  }
  // A tied weight is one tensor, saved under its lender's name; a file may hold it under the
  // borrower's name too (PyTorch's state_dict has both).
  for (const Node& node : nodes_) {
    if (node.tie < 0) continue;
    const Node& lender = nodes_[node.tie];
    for (WeightSlot& s : slots)
      if (s.name == lender.name + "." + lender.params[0].name)
        s.aliases.push_back(node.name + ".weight");
  }
  return slots;
}

// A ReLU whose producer is read by nothing else is folded into that producer when it can
// apply it (Linear, Conv2d, Add): one pass over the activation instead of two in each
// direction, and one activation buffer less. The ReLU node stays, as a view.
void Graph::fuse_activations() {
  // Whether node i's output gradient is the caller's buffer: i is the output, or its single
  // reader passes the gradient through to one that is (the graph then shares the buffer, see
  // allocate_activations).
  auto gradient_is_callers = [&](size_t i) {
    while (i + 1 < nodes_.size()) {
      if (nodes_[i].consumers.size() != 1) return false;
      auto [c, k] = nodes_[i].consumers[0];
      if (!nodes_[c].layer->gradient_passes_through(k)) return false;
      i = static_cast<size_t>(c);
    }
    return true;
  };
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    if (!node.layer->is_relu() || node.inputs.size() != 1) continue;
    Node* producer = &nodes_[node.inputs[0]];
    if (!producer->layer || producer->consumers.size() != 1) continue;
    // A ReLU after a max pool (Caffe's order): max(maxpool(x), 0) = maxpool(max(x, 0)), so the
    // layer before the pool may apply it; the pool then reads and passes on clamped values,
    // and the gradient of a window whose maximum is not positive is cut either way.
    if (producer->layer->commutes_with_relu() && producer->inputs.size() == 1 &&
        !producer->layer->absorb_relu()) {
      Node& before = nodes_[producer->inputs[0]];
      if (!before.layer || before.consumers.size() != 1) continue;
      producer = &before;
    }
    if (producer->layer->absorbed_relu_masks_gradient_in_place() && gradient_is_callers(i))
      continue;
    if (producer->layer->absorb_relu()) node.layer->mark_absorbed();
  }
}

Graph::~Graph() = default;

ChannelBlock Graph::output_block(const std::string& name) const {
  for (const Node& node : nodes_)
    if (node.name == name) return node.block;
  DTRAIN_INPUT_CHECK(false) << "no layer named '" << name << "'";
  return 1;
}

DType Graph::output_dtype(const std::string& name) const {
  for (const Node& node : nodes_)
    if (node.name == name) return node.dtype;
  DTRAIN_INPUT_CHECK(false) << "no layer named '" << name << "'";
  return DType::f32;
}

const Shape& Graph::input_shape() const {
  return nodes_.front().shape;
}
const Shape& Graph::output_shape() const {
  return nodes_.back().shape;
}
const std::string& Graph::output_name() const {
  // Under bf16 the last node may be the cast of the model's last layer back to f32.
  const Node& last = nodes_.back();
  return last.dtype != nodes_[last.inputs.empty() ? 0 : last.inputs[0]].dtype
             ? nodes_[last.inputs[0]].name
             : last.name;
}

int64_t Graph::forward_flops() const {
  int64_t total = 0;
  for (const Node& node : nodes_) total += node.flops;
  return total;
}

int64_t Graph::estimate_activation_bytes(bool recompute) const {
  // Materialized: the nodes are as planned; otherwise as assign_precision will make them.
  std::vector<std::unique_ptr<Layer>> casts;
  const std::vector<MemoryNode> nodes =
      backend_ != nullptr ? memory_nodes() : memory_nodes_under(precision_, casts);
  return plan_activations(nodes, input_gradient_, recompute).arena.size;
}

size_t Graph::name_width() const {
  size_t width = 22;  // long names (transformer.h.11.attn.c_attn) widen the column
  for (const Node& node : nodes_) width = std::max(width, node.name.size() + 1);
  return width;
}

std::string Graph::summary() const {
  const size_t w = name_width();
  // Under mixed precision a column says which dtype each activation has (casts are rows).
  const bool mixed = precision_ != DType::f32 && backend_ != nullptr;
  std::string out = fmt::format("{:<{}} {:<18} {:<20} {:>14} {:>16}{}\n", "layer", w, "type",
                                "output shape", "parameters", "FLOPs", mixed ? "  dtype" : "");
  for (const Node& node : nodes_) {
    std::string type = node.layer ? std::string(node.layer->type()) : "input";
    if (node.layer && node.layer->absorbed()) type += " (fused)";
    out += fmt::format("{:<{}} {:<18} {:<20} {:>14} {:>16}{}\n", node.name, w, type,
                       node.shape.inner().str(), node.param_count, node.flops,
                       mixed ? "  " + std::string(dtype_name(node.dtype)) : "");
  }
  out += fmt::format("{:<{}} {:<18} {:<20} {:>14} {:>16}\n", "total", w, "",
                     fmt::format("{} layers", nodes_.size() - 1), num_params_, forward_flops());
  if (arena_bytes_ > 0) {
    const int64_t batch = nodes_[0].shape[0];
    out += fmt::format(
        "activations: {:.2f} MB at batch {} ({:.0f} bytes per sample; {:.0f} without reuse){}\n",
        activation_bytes() / 1e6, batch, static_cast<double>(activation_bytes()) / batch,
        static_cast<double>(unplanned_activation_bytes()) / batch,
        recompute_ && !recompute_nodes_.empty()
            ? fmt::format(", {} blocks recomputed", recompute_nodes_.size())
            : "");
  }
  out += fmt::format("parameters: {}\n", num_params_);
  return out;
}

Backend& Graph::backend() {
  DTRAIN_CHECK(backend_ != nullptr) << "graph used before materialize()";
  return *backend_;
}

}  // namespace dtrain

namespace dtrain {

Graph::Cut Graph::cut_before(const std::string& name) const {
  size_t c = 0;
  for (size_t i = 1; i < nodes_.size(); ++i)
    if (nodes_[i].name == name) c = i;
  DTRAIN_INPUT_CHECK(c > 0) << "no layer named '" << name << "' to cut before";
  Cut cut;
  std::vector<bool> crosses(c, false);
  for (size_t j = c; j < nodes_.size(); ++j)
    for (int p : nodes_[j].inputs)
      if (static_cast<size_t>(p) < c) crosses[p] = true;
  for (size_t p = 0; p < c; ++p)
    if (crosses[p]) {
      cut.crossing.push_back(p == 0 ? std::string(kInputName) : nodes_[p].name);
      cut.shape = nodes_[p].shape;
    }
  const Node& node = nodes_[c];
  if (node.layer->absorbed() && !node.inputs.empty()) cut.fused_into = nodes_[node.inputs[0]].name;
  for (size_t p = 1; p < c; ++p) {
    cut.parameters_before += nodes_[p].param_count;
    cut.param_streams_before += nodes_[p].params.size();
  }
  if (!cut.valid()) cut.shape = Shape();
  return cut;
}

std::vector<std::string> Graph::cut_points() const {
  std::vector<std::string> points;
  for (size_t i = 2; i < nodes_.size(); ++i)
    if (cut_before(nodes_[i].name).valid()) points.push_back(nodes_[i].name);
  return points;
}

}  // namespace dtrain
