// SoftmaxCrossEntropy: the loss head every model ends with. Mean over the batch is the
// caller's grad_scale (1/b); the forward leaves the loss sum and the correct count on the
// device, read only when asked (last_stats synchronises).
//
// A sequence model's logits [b, T, classes] (a language model's next-token scores) are scored
// position by position against labels [b, T]: the loss is the mean over the T positions of
// each sample, so the backward divides the caller's grad_scale by T, and the statistics stay
// per sample (a sample's loss is the mean of its positions' losses, its `correct` the fraction
// of its positions predicted): train_loss and test_loss read per-token means and test_acc the
// next-token accuracy without any change downstream. With T = 1 (logits [b, classes], labels
// [b]) nothing is divided: the classification path is unchanged bit for bit.
#pragma once
#include <memory>   // unique_ptr
#include <utility>  // pair

#include "backend/backend.h"  // Backend, SoftmaxXentOp
#include "nn/layer.h"         // PerBatch

namespace dtrain {

class SoftmaxCrossEntropy {
 public:
  // `positions`: T of [b, T, classes] logits; 1 for [b, classes]. `probabilities`, if given (f32,
  // at least batch·T·classes elements, on the backend's device), is where the forward keeps the
  // softmax: the logits' gradient, which the backward then computes in place (the model passes
  // its graph's output gradient, which nothing else uses between the forward and the backward:
  // a language model's batch × T × vocabulary floats are not held twice).
  SoftmaxCrossEntropy(Backend& backend, int64_t batch, int64_t classes, int64_t positions = 1,
                      const Tensor& probabilities = {});
  // logits [b, classes] (or [b, T, classes]) on the device; labels [b] (or [b, T]) i32 on the
  // host or the device.
  void forward(const Tensor& logits, const Tensor& labels);
  // dlogits = (softmax − onehot)·grad_scale/T for the last forward.
  void backward(const Tensor& dlogits, float grad_scale);
  // {loss sum, correct count} over the samples of the last forward and of the forwards held
  // since the last call (hold_stats); copies them to the host.
  std::pair<double, double> stats();
  // The samples stats() reports next: the last forward's and the held ones'.
  int64_t last_batch() const { return batch_ + held_batch_; }
  // Adds the last forward's statistics to a sum on the device, without synchronising: the
  // micro-batches of one accumulated step are read as one.
  void hold_stats();

 private:
  struct Plan {
    std::unique_ptr<SoftmaxXentOp> op;
    Tensor probs, labels;
    Tensor logit_rows, gradient_rows;  // a sequence's logits and their gradient as rows
  };
  Plan& plan_for(int64_t batch);
  // `t` [b, T, classes] viewed as the op's rows [b·T, classes], through a view kept in `view`.
  const Tensor& rows_of(const Tensor& t, Tensor& view) const;

  Backend& backend_;
  int64_t classes_, positions_;
  Tensor probs_, labels_, stats_, host_stats_;
  Tensor held_;  // the held forwards' statistics (device; valid while held_batch_ > 0)
  int64_t held_batch_ = 0;
  Tensor bound_labels_;  // labels of the last forward (device)
  Plan* current_ = nullptr;
  int64_t batch_ = 0;
  PerBatch<Plan> plans_;
};

}  // namespace dtrain
