#include "sched/gossip/model_average.h"

namespace dtrain {

ModelAverager::ModelAverager(Model& model, Comm& comm, const GradientPlacement& placement)
    : model_(model), ranks_(comm.size()) {
  const Tensor& all = model.parameters();
  const int64_t offset = model.trainable_offset();
  weights_ = all.slice(offset, {all.numel() - offset});
  if (ranks_ == 1) return;
  weight_sums_ = std::make_unique<GradientAllreducer>(comm, "none", weights_.numel(), placement);
  if (model.buffers().numel() > 0)
    statistic_sums_ =
        std::make_unique<GradientAllreducer>(comm, "none", model.buffers().numel(), placement);
}

void ModelAverager::average() {
  if (!weight_sums_) return;
  Backend& backend = model_.backend();
  const float inverse = 1.0f / static_cast<float>(ranks_);
  // One after the other: two NCCL communicators in flight at once could deadlock.
  weight_sums_->start(weights_).get();
  backend.scale(weights_, inverse);
  if (statistic_sums_) {
    statistic_sums_->start(model_.buffers()).get();
    backend.scale(model_.buffers(), inverse);
  }
}

void ModelAverager::with_average(const std::function<void()>& use) {
  if (!weight_sums_) return use();
  Backend& backend = model_.backend();
  const Tensor own_weights = backend.empty(weights_.shape());
  backend.copy(own_weights, weights_);
  Tensor own_statistics;
  if (statistic_sums_) {
    own_statistics = backend.empty(model_.buffers().shape());
    backend.copy(own_statistics, model_.buffers());
  }
  average();
  discard_times();
  use();
  backend.copy(weights_, own_weights);
  if (statistic_sums_) backend.copy(model_.buffers(), own_statistics);
}

void ModelAverager::discard_times() {
  for (GradientAllreducer* sums : {weight_sums_.get(), statistic_sums_.get()}) {
    double comm = 0, compress = 0;
    if (sums) sums->take_times(&comm, &compress);
  }
}

}  // namespace dtrain
