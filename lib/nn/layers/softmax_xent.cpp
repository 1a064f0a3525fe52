#include "nn/layers/softmax_xent.h"

namespace dtrain {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(Backend& backend, int64_t batch, int64_t classes,
                                         int64_t positions, const Tensor& probabilities)
    : backend_(backend), classes_(classes), positions_(positions) {
  DTRAIN_CHECK(positions >= 1) << "softmax cross-entropy over " << positions << " positions";
  const Shape rows{batch * positions, classes};
  if (probabilities.defined() && probabilities.dtype() == DType::f32 &&
      probabilities.device() == backend.device() && probabilities.numel() >= rows.numel())
    probs_ = probabilities.slice(0, rows);
  else
    probs_ = backend.empty(rows);
  labels_ = positions == 1 ? backend.empty({batch}, DType::i32)
                           : backend.empty({batch, positions}, DType::i32);
  stats_ = backend.zeros({2});
  held_ = backend.zeros({2});
  host_stats_ = Tensor::zeros({2});
  current_ = &plan_for(batch);
}

SoftmaxCrossEntropy::Plan& SoftmaxCrossEntropy::plan_for(int64_t batch) {
  if (!plans_.has(batch)) {  // the build batch, and once for a smaller last batch
    const int64_t most = labels_.shape()[0];
    DTRAIN_CHECK(batch > 0 && batch <= most)
        << "batch of " << batch << " exceeds the build batch " << most;
    plans_.add(batch, {backend_.make_softmax_xent({batch * positions_, classes_}),
                       probs_.narrow_batch(batch * positions_), labels_.narrow_batch(batch),
                       Tensor(), Tensor()});
  }
  return plans_.at(batch);
}

void SoftmaxCrossEntropy::forward(const Tensor& logits, const Tensor& labels) {
  const int64_t batch = logits.shape()[0];
  DTRAIN_CHECK(labels.dtype() == DType::i32 && labels.numel() == batch * positions_)
      << "labels " << labels.shape().str() << " " << dtype_name(labels.dtype()) << " for " << batch
      << " samples, expected " << (positions_ == 1 ? Shape{batch} : Shape{batch, positions_}).str()
      << " i32";
  current_ = &plan_for(batch);
  batch_ = batch;
  if (labels.device() == backend_.device()) {
    bound_labels_ = labels;  // in place; no allocation when the shape rank is unchanged
  } else {
    backend_.copy(current_->labels, labels);
    bound_labels_ = current_->labels;
  }
  if (positions_ == 1) {  // no copy of the tensor: the steady state allocates nothing
    current_->op->forward(logits, bound_labels_, current_->probs, stats_);
    return;
  }
  // The op scores rows: a sequence's positions are rows of their own.
  current_->op->forward(rows_of(logits, current_->logit_rows), bound_labels_, current_->probs,
                        stats_);
}

void SoftmaxCrossEntropy::backward(const Tensor& dlogits, float grad_scale) {
  if (positions_ == 1) {
    current_->op->backward(current_->probs, bound_labels_, dlogits, grad_scale);
    return;
  }
  current_->op->backward(current_->probs, bound_labels_, rows_of(dlogits, current_->gradient_rows),
                         grad_scale / static_cast<float>(positions_));
}

const Tensor& SoftmaxCrossEntropy::rows_of(const Tensor& t, Tensor& view) const {
  const int64_t rows = batch_ * positions_;
  // Made again only for another tensor (one view per batch size): the steady state allocates
  // nothing.
  if (!view.defined() || view.raw() != t.raw() || view.shape()[0] != rows)
    view = t.reshape({rows, classes_});
  return view;
}

void SoftmaxCrossEntropy::hold_stats() {
  if (held_batch_ == 0)
    backend_.copy(held_, stats_);
  else
    backend_.axpy(1.0f, stats_, held_);
  held_batch_ += batch_;
}

std::pair<double, double> SoftmaxCrossEntropy::stats() {
  if (held_batch_ > 0) {
    backend_.axpy(1.0f, stats_, held_);
    backend_.copy(host_stats_, held_);
    held_batch_ = 0;
  } else {
    backend_.copy(host_stats_, stats_);
  }
  backend_.synchronize();
  const double loss = host_stats_.data<float>()[0], correct = host_stats_.data<float>()[1];
  if (positions_ == 1) return {loss, correct};
  // Per sample: the mean over its positions, summed over the samples.
  return {loss / static_cast<double>(positions_), correct / static_cast<double>(positions_)};
}

}  // namespace dtrain
