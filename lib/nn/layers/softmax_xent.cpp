#include "nn/layers/softmax_xent.h"

namespace dtrain {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(Backend& backend, int64_t batch, int64_t classes)
    : backend_(backend), classes_(classes) {
  probs_ = backend.empty({batch, classes});
  labels_ = backend.empty({batch}, DType::i32);
  stats_ = backend.zeros({2});
  host_stats_ = Tensor::zeros({2});
  current_ = &plan_for(batch);
}

SoftmaxCrossEntropy::Plan& SoftmaxCrossEntropy::plan_for(int64_t batch) {
  if (!plans_.has(batch)) {  // the build batch, and once for a smaller last batch
    DTRAIN_CHECK(batch > 0 && batch <= probs_.shape()[0])
        << "batch of " << batch << " exceeds the build batch " << probs_.shape()[0];
    plans_.add(batch, {backend_.make_softmax_xent({batch, classes_}), probs_.narrow_batch(batch),
                       labels_.narrow_batch(batch)});
  }
  return plans_.at(batch);
}

void SoftmaxCrossEntropy::forward(const Tensor& logits, const Tensor& labels) {
  const int64_t batch = logits.shape()[0];
  DTRAIN_CHECK(labels.dtype() == DType::i32 && labels.numel() == batch)
      << "labels " << labels.shape().str() << " " << dtype_name(labels.dtype()) << " for " << batch
      << " samples, expected [" << batch << "] i32";
  current_ = &plan_for(batch);
  batch_ = batch;
  if (labels.device() == backend_.device()) {
    bound_labels_ = labels;  // in place; no allocation when the shape rank is unchanged
  } else {
    backend_.copy(current_->labels, labels);
    bound_labels_ = current_->labels;
  }
  current_->op->forward(logits, bound_labels_, current_->probs, stats_);
}

void SoftmaxCrossEntropy::backward(const Tensor& dlogits, float grad_scale) {
  current_->op->backward(current_->probs, bound_labels_, dlogits, grad_scale);
}

std::pair<double, double> SoftmaxCrossEntropy::stats() {
  backend_.copy(host_stats_, stats_);
  backend_.synchronize();
  return {host_stats_.data<float>()[0], host_stats_.data<float>()[1]};
}

}  // namespace dtrain
