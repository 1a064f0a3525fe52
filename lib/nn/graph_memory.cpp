// Graph::materialize: flat buffers, parameter initialisation, activation and gradient memory
// (planned in graph_plan.cpp) and the per-batch tensor plans.
#include <algorithm>  // fill, sort

#include "core/rng.h"  // random_uniform, random_normal, stream_id
#include "nn/graph.h"
#include "nn/graph_internal.h"  // Graph::Node, Graph::Plan

namespace dtrain {

// ---- materialize ---------------------------------------------------------------------------

// Hands every layer its views of the flat parameter, gradient and buffer tensors.
void Graph::bind_layers() {
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    std::vector<Tensor> p, g, b;
    int64_t offset = node.param_offset;
    for (const ParamDecl& d : node.params) {
      p.push_back(params_.slice(offset, d.shape));
      g.push_back(grads_.slice(offset, d.shape));
      offset += d.shape.numel();
    }
    offset = node.buffer_offset;
    for (const ParamDecl& d : node.buffers) {
      b.push_back(buffers_.slice(offset, d.shape));
      offset += d.shape.numel();
    }
    node.layer->bind(p, g, b);
  }
  for (Node& node : nodes_) {
    if (node.tie < 0) continue;
    const Node& lender = nodes_[node.tie];
    const Shape& shape = lender.params[0].shape;
    node.layer->bind_tied(params_.slice(lender.param_offset, shape),
                          grads_.slice(lender.param_offset, shape));
  }
}

void Graph::set_gradients(const Tensor& flat) {
  DTRAIN_CHECK(backend_ != nullptr) << "graph used before materialize()";
  DTRAIN_CHECK(flat.numel() == num_params_ && flat.dtype() == grads_.dtype() &&
               flat.device() == grads_.device())
      << "set_gradients: needs a flat buffer like gradients() (" << num_params_ << " elements)";
  if (flat.raw() == grads_.raw()) return;  // already bound (K = 1, one slot): no rebinding
  grads_ = flat;
  bind_layers();
}

void Graph::set_parameters(const Tensor& flat) {
  DTRAIN_CHECK(backend_ != nullptr) << "graph used before materialize()";
  DTRAIN_CHECK(flat.numel() == num_params_ && flat.dtype() == params_.dtype() &&
               flat.device() == params_.device())
      << "set_parameters: needs a flat buffer like parameters() (" << num_params_ << " elements)";
  if (flat.raw() == params_.raw()) return;
  params_ = flat;
  bind_layers();
}

void Graph::set_buffers(const Tensor& flat) {
  DTRAIN_CHECK(backend_ != nullptr) << "graph used before materialize()";
  DTRAIN_CHECK(flat.numel() == num_buffers_ && flat.dtype() == buffers_.dtype() &&
               flat.device() == buffers_.device())
      << "set_buffers: needs a flat buffer like buffers() (" << num_buffers_ << " elements)";
  if (flat.raw() == buffers_.raw()) return;
  buffers_ = flat;
  bind_layers();
}

void Graph::set_forward_hook(const std::string& name, std::function<void()> hook) {
  for (size_t i = 1; i < nodes_.size(); ++i)
    if (nodes_[i].name == name) {
      hooks_.resize(nodes_.size());
      hooks_[i] = std::move(hook);
      return;
    }
  DTRAIN_INPUT_CHECK(false) << "no layer named '" << name << "' to hook into";
}

Graph::WeightRanges Graph::weight_ranges_of(const Node& node) const {
  WeightRanges ranges;
  if (node.tie >= 0) {
    const Node& lender = nodes_[node.tie];
    ranges.emplace_back(lender.param_offset, lender.param_offset + lender.params[0].shape.numel());
  }
  if (node.param_count > 0)
    ranges.emplace_back(node.param_offset, node.param_offset + node.param_count);
  return ranges;
}

std::vector<Graph::WeightRanges> Graph::forward_weight_ranges() const {
  std::vector<WeightRanges> ranges;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    WeightRanges r = weight_ranges_of(nodes_[i]);
    if (!r.empty()) ranges.push_back(std::move(r));
  }
  return ranges;
}

void Graph::set_weight_hook(std::function<void(const WeightRanges&, bool)> need) {
  weight_hook_ = std::move(need);
  node_weights_.assign(nodes_.size(), {});
  block_weights_.assign(block_names_.size(), {});
  for (size_t i = 1; i < nodes_.size(); ++i) {
    node_weights_[i] = weight_ranges_of(nodes_[i]);
    const int b = nodes_[i].block_id;
    if (b < 0) continue;
    for (const auto& r : node_weights_[i]) block_weights_[b].push_back(r);
  }
  for (WeightRanges& r : block_weights_) std::sort(r.begin(), r.end());
}

void Graph::materialize(Backend& backend, uint64_t seed, bool input_gradient,
                        uint64_t first_param_stream) {
  DTRAIN_CHECK(backend_ == nullptr) << "graph materialized twice";
  backend_ = &backend;
  seed_ = seed;
  input_gradient_ = input_gradient;
  // Reserved: a sharded run gives back what its rank does not hold (Backend::release).
  params_ = backend.reserve({num_params_});
  grads_ = backend.reserve({num_params_});
  buffers_ = backend.empty({num_buffers_});
  initialise(seed, first_param_stream);
  assign_precision();
  allocate_activations();
}

void Graph::materialize_sharing(const Graph& other, bool input_gradient) {
  DTRAIN_CHECK(backend_ == nullptr) << "graph materialized twice";
  DTRAIN_CHECK(other.backend_ != nullptr && other.num_params_ == num_params_ &&
               other.num_buffers_ == num_buffers_)
      << "materialize_sharing: the other graph is not materialized or has other layers";
  backend_ = other.backend_;
  seed_ = other.seed_;
  input_gradient_ = input_gradient;
  params_ = other.params_;
  grads_ = other.grads_;
  buffers_ = other.buffers_;
  precision_ = other.precision_;
  assign_precision();
  allocate_activations();
}

void Graph::allocate_activations() {
  bind_layers();
  choose_layouts();
  apply_memory_plan(plan_activations(memory_nodes(), input_gradient_, recompute_));
  update_needs();
  plans_.push_back(make_plan(nodes_[0].shape[0]));
  current_ = plans_.back().get();
}

void Graph::initialise(uint64_t seed, uint64_t first_param_stream) {
  // Host buffers filled element by element from the counter RNG, then one copy each (host
  // parameters are filled where they are: no second copy of a big model's weights).
  const bool in_place = params_.device() == Device::cpu;
  Tensor host = in_place ? params_ : Tensor::empty({num_params_});
  Tensor host_buffers = Tensor::empty({num_buffers_});
  float* p = host.data<float>();
  float* b = host_buffers.data<float>();
  uint64_t param_index = first_param_stream;
  auto fill = [&](float* dst, const ParamDecl& d, uint64_t stream) {
    const int64_t count = d.shape.numel();
    const float a = d.init.a;
    switch (d.init.kind) {
      case ParamInit::Kind::constant:
        std::fill(dst, dst + count, a);
        break;
      // Each element is a pure function of (seed, stream, j): threads cannot change values.
      case ParamInit::Kind::uniform:
#pragma omp parallel for if (count > (1 << 16))
        for (int64_t j = 0; j < count; ++j)
          dst[j] = (2.0f * random_uniform(seed, stream, j) - 1.0f) * a;
        break;
      case ParamInit::Kind::normal:
#pragma omp parallel for if (count > (1 << 16))
        for (int64_t j = 0; j < count; ++j) dst[j] = random_normal(seed, stream, j) * a;
        break;
    }
  };
  for (const Node& node : nodes_) {
    int64_t offset = node.param_offset;
    for (const ParamDecl& d : node.params) {
      fill(p + offset, d, stream_id(RngStream::init, param_index++));
      offset += d.shape.numel();
    }
    offset = node.buffer_offset;
    for (const ParamDecl& d : node.buffers) {
      fill(b + offset, d, 0);  // constants only
      offset += d.shape.numel();
    }
  }
  if (!in_place) backend_->copy(params_, host);
  backend_->copy(buffers_, host_buffers);
}

std::unique_ptr<Graph::Plan> Graph::make_plan(int64_t batch) {
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  p.batch = batch;
  const size_t n = nodes_.size();
  p.out.resize(n);
  p.grad.resize(n);
  p.in.resize(n);
  p.dx.resize(n);
  p.scratch.resize(n);
  for (size_t i = 1; i < n; ++i) nodes_[i].layer->prepare(*backend_, batch);
  for (size_t i = 0; i < n; ++i) {
    Node& node = nodes_[i];
    const Shape shape = node.shape.with_batch(batch);
    if (node.out_owner != 0) p.out[i] = nodes_[node.out_owner].out_buf.slice(0, shape);
    const Node& owner = nodes_[node.grad_owner];
    if (owner.grad_buf.defined()) p.grad[i] = owner.grad_buf.slice(0, shape);
    if (i == 0) continue;
    p.in[i].resize(node.inputs.size());
    p.dx[i].resize(node.inputs.size());
    p.scratch[i].resize(node.inputs.size());
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Node& src = nodes_[node.inputs[k]];
      const Shape view = node.views[k].with_batch(batch);
      if (src.out_owner != 0) p.in[i][k] = nodes_[src.out_owner].out_buf.slice(0, view);
      if (node.routes[k] == Route::accumulate)
        p.scratch[i][k] = scratch_.view_bytes(node.scratch_offset[k], view, src.dtype);
    }
  }
  update_targets(p);
  return plan;
}

// Which nodes need d(loss)/d(output): those with trainable parameters and everything after.
void Graph::update_needs() {
  nodes_[0].need_grad = input_gradient_;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    node.trainable = node.range >= frozen_;
    // A tied layer trains with its lender, which precedes it: frozen when the lender is.
    if (node.tie >= 0) node.trainable = nodes_[node.tie].range >= frozen_;
    node.need_grad = node.trainable;
    for (int src : node.inputs) node.need_grad |= nodes_[src].need_grad;
  }
}

void Graph::update_targets(Plan& p) {
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Node& src = nodes_[node.inputs[k]];
      Tensor& dx = p.dx[i][k];
      if (!src.need_grad || node.routes[k] == Route::shared) {
        dx = Tensor();
      } else if (node.routes[k] == Route::accumulate) {
        dx = p.scratch[i][k];
      } else {
        dx = nodes_[src.grad_owner].grad_buf.slice(0, node.views[k].with_batch(p.batch));
      }
    }
  }
}

}  // namespace dtrain
