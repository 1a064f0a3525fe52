// Graph forward/backward at steady state (no allocation, no op creation), input binding,
// smaller batches and freezing.
#include "nn/graph.h"

#include <fmt/format.h>  // the profile table

#include <chrono>               // steady_clock: per-layer profile
#include "nn/graph_internal.h"  // Graph::Node, Graph::Plan

namespace dtrain {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

// ---- running -------------------------------------------------------------------------------

Graph::Plan& Graph::plan_for(int64_t batch) {
  for (auto& plan : plans_)
    if (plan->batch == batch) return *plan;
  DTRAIN_CHECK(batch > 0 && batch <= nodes_[0].shape[0])
      << "batch of " << batch << " exceeds the build batch " << nodes_[0].shape[0];
  plans_.push_back(make_plan(batch));  // once per batch size
  return *plans_.back();
}

void Graph::bind_input(Plan& p, const Tensor& input) {
  const Shape& sample = nodes_[0].shape;
  const DType dtype = nodes_[0].dtype;
  bool fits = input.dtype() == dtype && input.shape().rank() == sample.rank();
  for (int d = 1; fits && d < sample.rank(); ++d) fits = input.shape()[d] == sample[d];
  DTRAIN_CHECK(fits) << "model input " << input.shape().str() << " " << dtype_name(input.dtype())
                     << ", expected batches of " << sample.inner().str() << " "
                     << dtype_name(dtype);
  if (input.device() == backend_->device()) {
    if (p.bound == input.raw() && p.out[0].shape() == input.shape()) return;
    p.out[0] = input;
  } else {
    if (!staging_.defined()) staging_ = backend_->empty(sample, dtype);  // first host input only
    if (!p.staging.defined()) p.staging = staging_.narrow_batch(p.batch);
    backend_->copy(p.staging, input);
    if (p.bound == p.staging.raw()) return;
    p.out[0] = p.staging;
  }
  p.bound = p.out[0].raw();
  refresh_input_views(p);
}

namespace {
// dst ← src viewed as `shape` with `batch` rows; a plain assignment (no allocation: the shape
// vector is reused) when the shapes agree, as for a convolution reading the input.
void view_into(Tensor& dst, const Tensor& src, const Shape& shape, int64_t batch) {
  const Shape& s = src.shape();
  bool same = s.rank() == shape.rank() && s[0] == batch;
  for (int d = 1; same && d < s.rank(); ++d) same = s[d] == shape[d];
  if (same) {
    dst = src;
  } else {
    dst = src.reshape(shape.with_batch(batch));
  }
}
}  // namespace

// Views of the input memory: readers of the input and views of views of it. Rebuilt only when
// the caller passes a different input tensor.
void Graph::refresh_input_views(Plan& p) {
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    if (node.out_owner == 0) view_into(p.out[i], p.out[0], node.shape, p.batch);
    for (size_t k = 0; k < node.inputs.size(); ++k)
      if (nodes_[node.inputs[k]].out_owner == 0)
        view_into(p.in[i][k], p.out[0], node.views[k], p.batch);
  }
}

const Tensor& Graph::forward(const Tensor& input) {
  DTRAIN_CHECK(backend_ != nullptr) << "graph used before materialize()";
  Plan& p = plan_for(input.shape().rank() > 0 ? input.shape()[0] : 0);
  bind_input(p, input);
  current_ = &p;
  RunContext ctx{backend_, training_, seed_, step_, 0};
  if (profiling_) times_.resize(nodes_.size());
  for (size_t i = 1; i < nodes_.size(); ++i) {
    if (training_ && i < hooks_.size() && hooks_[i]) hooks_[i]();
    if (weight_hook_ && !node_weights_[i].empty()) weight_hook_(node_weights_[i], false);
    if (nodes_[i].layer->output_is_view()) continue;
    ctx.node = nodes_[i].stream;
    if (!profiling_ || !training_) {  // the profile is of training steps
      nodes_[i].layer->forward(ctx, p.in[i], p.out[i]);
      continue;
    }
    backend_->synchronize();
    const auto start = std::chrono::steady_clock::now();
    nodes_[i].layer->forward(ctx, p.in[i], p.out[i]);
    backend_->synchronize();
    times_[i].forward_s += seconds_since(start);
    ++times_[i].forwards;
    times_[i].samples += p.batch;
  }
  if (training_) forward_step_ = step_++;
  return p.out.back();
}

const Tensor& Graph::output_gradient() {
  return current_->grad.back();
}

void Graph::backward(const std::function<void(int64_t)>& on_ready) {
  DTRAIN_CHECK(backend_ != nullptr) << "graph used before materialize()";
  Plan& p = *current_;
  RunContext ctx{backend_, training_, seed_, step_, 0};
  bool reported = false;
  for (size_t i = nodes_.size(); i-- > 1;) {
    Node& node = nodes_[i];
    if (training_ && i < recompute_at_.size() && recompute_at_[i] >= 0)
      recompute_block(p, recompute_at_[i]);
    if (!node.need_grad) continue;
    if (weight_hook_ && !node_weights_[i].empty()) weight_hook_(node_weights_[i], true);
    ctx.node = node.stream;
    if (profiling_) backend_->synchronize();
    const auto start = std::chrono::steady_clock::now();
    node.layer->backward(ctx, p.in[i], p.out[i], p.grad[i], p.dx[i], node.trainable);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.routes[k] != Route::accumulate || !p.dx[i][k].defined()) continue;
      const Tensor& sum = p.grad[node.inputs[k]];
      if (sum.dtype() == DType::f32) {
        backend_->axpy(1.0f, p.scratch[i][k], sum);
      } else {
        backend_->add(sum, p.scratch[i][k], sum);  // bf16: summed in f32, rounded once
      }
    }
    if (profiling_) {
      backend_->synchronize();
      times_[i].backward_s += seconds_since(start);
      ++times_[i].backwards;
    }
    // A layer without parameters of its own (a tied head) finishes no range: its borrowed
    // gradient is final only after the lender's backward, which reports it.
    if (node.trainable && node.param_count > 0 && on_ready) {
      on_ready(node.param_offset);
      reported = true;
    }
  }
  if (on_ready && !reported) on_ready(num_params_);
}

// The block's forward again, from its saved input, at the step of the forward it replays
// (model.recompute: blocks): its interior activations and its layers' per-batch state come
// back bit for bit. Skipped when no layer of the block needs its backward (frozen).
void Graph::recompute_block(Plan& p, int block) {
  const std::vector<int>& layers = recompute_nodes_[block];
  bool needed = false;
  for (size_t i = 1; i < nodes_.size() && !needed; ++i)
    needed = nodes_[i].block_id == block && nodes_[i].need_grad;
  if (!needed) return;
  if (weight_hook_ && !block_weights_[block].empty()) weight_hook_(block_weights_[block], true);
  RunContext ctx{backend_, true, seed_, forward_step_, 0, true};
  for (int j : layers) {
    ctx.node = nodes_[j].stream;
    if (!profiling_) {
      nodes_[j].layer->forward(ctx, p.in[j], p.out[j]);
      continue;
    }
    // Profiled as part of the layer's backward: it is what the layer's backward costs now.
    backend_->synchronize();
    const auto start = std::chrono::steady_clock::now();
    nodes_[j].layer->forward(ctx, p.in[j], p.out[j]);
    backend_->synchronize();
    times_[j].backward_s += seconds_since(start);
  }
}

const Tensor& Graph::input_gradient() {
  DTRAIN_CHECK(input_gradient_) << "materialize the graph with input_gradient = true";
  return current_->grad[0];
}

void Graph::freeze_first(int layers) {
  DTRAIN_INPUT_CHECK(layers >= 0 && layers <= static_cast<int>(ranges_.size()))
      << "cannot freeze the first " << layers << " layers: the model has " << ranges_.size()
      << " layers with parameters";
  frozen_ = layers;
  if (backend_ == nullptr) return;
  update_needs();
  for (auto& plan : plans_) update_targets(*plan);
}

std::string Graph::layer_profile() const {
  double total = 0;
  for (const LayerTime& t : times_) total += t.forward_s + t.backward_s;
  const size_t w = name_width();
  std::string out = fmt::format("{:<{}} {:<18} {:>6} {:>11} {:>11} {:>7} {:>9}\n", "layer", w,
                                "type", "layout", "forward ms", "backward ms", "share", "GFLOP/s");
  for (size_t i = 1; i < times_.size() && i < nodes_.size(); ++i) {
    const LayerTime& t = times_[i];
    const Node& node = nodes_[i];
    if (t.forwards == 0 && t.backwards == 0) continue;
    const double fwd_ms = t.forwards ? 1e3 * t.forward_s / t.forwards : 0;
    const double bwd_ms = t.backwards ? 1e3 * t.backward_s / t.backwards : 0;
    // A training step costs about three forwards (forward, data and weight gradients).
    const double gflops = t.forward_s + t.backward_s > 0 && t.backwards > 0
                              ? 3.0 * node.flops * t.samples / (t.forward_s + t.backward_s) / 1e9
                              : 0;
    out += fmt::format("{:<{}} {:<18} {:>6} {:>11.3f} {:>11.3f} {:>6.1f}% {:>9.1f}\n", node.name, w,
                       node.layer->type(),
                       node.block > 1           ? fmt::format("{}c", node.block)
                       : node.shape.rank() == 4 ? std::string("nchw")
                                                : std::string("plain"),
                       fwd_ms, bwd_ms, total > 0 ? 100 * (t.forward_s + t.backward_s) / total : 0,
                       gflops);
  }
  out += fmt::format("total {:.3f} s in layers\n", total);
  return out;
}

int64_t Graph::trainable_offset() const {
  return frozen_ < static_cast<int>(ranges_.size()) ? ranges_[frozen_].offset : num_params_;
}

}  // namespace dtrain
