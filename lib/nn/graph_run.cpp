// Graph forward/backward at steady state (no allocation, no op creation), input binding,
// smaller batches and freezing.
#include "nn/graph.h"
#include "nn/graph_internal.h"  // Graph::Node, Graph::Plan

namespace dtrain {

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
  bool fits = input.dtype() == DType::f32 && input.shape().rank() == sample.rank();
  for (int d = 1; fits && d < sample.rank(); ++d) fits = input.shape()[d] == sample[d];
  DTRAIN_CHECK(fits) << "model input " << input.shape().str() << " " << dtype_name(input.dtype())
                     << ", expected batches of " << sample.inner().str() << " f32";
  if (input.device() == backend_->device()) {
    if (p.bound == input.raw() && p.out[0].shape() == input.shape()) return;
    p.out[0] = input;
  } else {
    if (!staging_.defined()) staging_ = backend_->empty(sample);  // first host input only
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
  for (size_t i = 1; i < nodes_.size(); ++i) {
    if (training_ && i < hooks_.size() && hooks_[i]) hooks_[i]();
    if (nodes_[i].layer->output_is_view()) continue;
    ctx.node = static_cast<int>(i);
    nodes_[i].layer->forward(ctx, p.in[i], p.out[i]);
  }
  if (training_) ++step_;
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
    if (!node.need_grad) continue;
    ctx.node = static_cast<int>(i);
    node.layer->backward(ctx, p.in[i], p.out[i], p.grad[i], p.dx[i], node.trainable);
    for (size_t k = 0; k < node.inputs.size(); ++k)
      if (node.routes[k] == Route::accumulate && p.dx[i][k].defined())
        backend_->axpy(1.0f, p.scratch[i][k], p.grad[node.inputs[k]]);
    if (node.trainable && on_ready) {
      on_ready(node.param_offset);
      reported = true;
    }
  }
  if (on_ready && !reported) on_ready(num_params_);
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

int64_t Graph::trainable_offset() const {
  return frozen_ < static_cast<int>(ranges_.size()) ? ranges_[frozen_].offset : num_params_;
}

}  // namespace dtrain
