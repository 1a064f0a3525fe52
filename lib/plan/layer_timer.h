// LayerTimer: each parameterised layer's forward and backward time, measured inside real
// training iterations through Model's forward hooks and backward's on_ready calls (SAPipe's
// profile of u_i and b_i, §3.1). The time of a layer runs from its hook to the next layer's, so
// it includes the unparameterised layers after it (ReLU, pooling); the last layer's forward and
// backward, which no hook separates, are split 1 : 2. On an asynchronous backend each mark
// synchronises, so timed iterations run slower than others: time only a few.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/timer.h"         // Clock
#include "nn/model.h"           // Model, LayerRange
#include "plan/stale_layers.h"  // LayerCost

namespace dtrain {

class LayerTimer {
 public:
  // Times the layers of `layers` (parameterised layers of `model`, forward order).
  LayerTimer(Model& model, std::vector<LayerRange> layers);
  ~LayerTimer();  // removes its hooks
  LayerTimer(const LayerTimer&) = delete;
  LayerTimer& operator=(const LayerTimer&) = delete;

  // Around one iteration's forward and backward; pass on_ready() to Model::backward (or call it
  // from the caller's own on_ready).
  void begin();
  void on_ready(int64_t offset);
  void end();  // adds the iteration's times
  // Mean times per iteration (comm_s left 0); empty before the first iteration.
  std::vector<LayerCost> means() const;
  int iterations() const { return iterations_; }

 private:
  void mark(Clock::time_point& at);

  Model& model_;
  std::vector<LayerRange> layers_;
  std::vector<Clock::time_point> hook_at_, ready_at_;
  Clock::time_point start_;
  std::vector<double> forward_s_, backward_s_;
  int iterations_ = 0;
};

}  // namespace dtrain
