// ModelAverager: the mean of the ranks' models — trainable parameters and BatchNorm statistics —
// for the algorithms whose ranks hold different models (D-PSGD, AD-PSGD). Evaluation and the
// saved model use the mean (docs/architecture.md, decision 9); each rank then trains on from its
// own.
#pragma once
#include <functional>
#include <memory>

#include "comm/gradient_allreducer.h"  // GradientAllreducer: sums on its own communicator
#include "nn/model.h"                  // Model

namespace dtrain {

class ModelAverager {
 public:
  // A collective: every rank constructs one at the same point (the all-reducers' communicators).
  ModelAverager(Model& model, Comm& comm, const GradientPlacement& placement);
  // The model's trainable parameters and statistics ← their mean over the ranks (a collective;
  // complete on return).
  void average();
  // Runs `use` on the mean model, then restores this rank's own (a collective). The summing
  // time is dropped: it is not training (timing.csv's comm_s stays within the epochs).
  void with_average(const std::function<void()>& use);

 private:
  void discard_times();

  Model& model_;
  int ranks_;
  Tensor weights_;  // the trainable range of the parameters
  std::unique_ptr<GradientAllreducer> weight_sums_, statistic_sums_;  // null with one rank / no BN
};

// What `use` returns on the mean of the ranks' models (their evaluation, their saved weights);
// every rank then continues from its own (a collective). Null `averager` (one rank): on the
// model as it is.
template <class Use>
auto on_mean_model(ModelAverager* averager, Use use) {
  if (!averager) return use();
  decltype(use()) result;
  averager->with_average([&] { result = use(); });
  return result;
}

}  // namespace dtrain
