#include "plan/layer_timer.h"

#include <algorithm>  // lower_bound

namespace dtrain {

LayerTimer::LayerTimer(Model& model, std::vector<LayerRange> layers)
    : model_(model),
      layers_(std::move(layers)),
      hook_at_(layers_.size()),
      ready_at_(layers_.size()),
      forward_s_(layers_.size()),
      backward_s_(layers_.size()) {
  for (size_t i = 0; i < layers_.size(); ++i)
    model_.set_forward_hook(layers_[i].name, [this, i] { mark(hook_at_[i]); });
}

LayerTimer::~LayerTimer() {
  for (const LayerRange& layer : layers_) model_.set_forward_hook(layer.name, {});
}

void LayerTimer::mark(Clock::time_point& at) {
  model_.backend().synchronize();
  at = Clock::now();
}

void LayerTimer::begin() {
  mark(start_);
  for (size_t i = 0; i < layers_.size(); ++i) hook_at_[i] = ready_at_[i] = start_;
}

void LayerTimer::on_ready(int64_t offset) {
  // Offsets increase with the layer index: find the layer whose gradient just became final.
  auto it = std::lower_bound(layers_.begin(), layers_.end(), offset,
                             [](const LayerRange& l, int64_t o) { return l.offset < o; });
  if (it != layers_.end() && it->offset == offset) mark(ready_at_[it - layers_.begin()]);
}

void LayerTimer::end() {
  Clock::time_point end;
  mark(end);
  const size_t m = layers_.size();
  if (m == 0) return;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::max(0.0, std::chrono::duration<double>(b - a).count());
  };
  for (size_t i = 0; i + 1 < m; ++i) {
    forward_s_[i] += seconds(hook_at_[i], hook_at_[i + 1]);
    backward_s_[i] += seconds(ready_at_[i + 1], ready_at_[i]);
  }
  forward_s_[0] += seconds(start_, hook_at_[0]);  // what runs before the first layer
  backward_s_[0] += seconds(ready_at_[0], end);   // and its backward
  const double last = seconds(hook_at_[m - 1], ready_at_[m - 1]);
  forward_s_[m - 1] += last / 3;
  backward_s_[m - 1] += last * 2 / 3;
  ++iterations_;
}

std::vector<LayerCost> LayerTimer::means() const {
  std::vector<LayerCost> costs;
  if (iterations_ == 0) return costs;
  for (size_t i = 0; i < layers_.size(); ++i)
    costs.push_back({forward_s_[i] / iterations_, backward_s_[i] / iterations_, 0});
  return costs;
}

}  // namespace dtrain
