// SoftmaxCrossEntropy: the loss head every model ends with. Mean over the batch is the
// caller's grad_scale (1/b); the forward leaves the loss sum and the correct count on the
// device, read only when asked (last_stats synchronises).
#pragma once
#include <memory>   // unique_ptr
#include <utility>  // pair

#include "backend/backend.h"  // Backend, SoftmaxXentOp
#include "nn/layer.h"         // PerBatch

namespace dtrain {

class SoftmaxCrossEntropy {
 public:
  SoftmaxCrossEntropy(Backend& backend, int64_t batch, int64_t classes);
  // logits [b, classes] on the device; labels [b] i32 on the host or the device.
  void forward(const Tensor& logits, const Tensor& labels);
  // dlogits = (softmax − onehot)·grad_scale for the last forward.
  void backward(const Tensor& dlogits, float grad_scale);
  // {loss sum, correct count} of the last forward; copies them to the host.
  std::pair<double, double> stats();
  int64_t last_batch() const { return batch_; }

 private:
  struct Plan {
    std::unique_ptr<SoftmaxXentOp> op;
    Tensor probs, labels;
  };
  Plan& plan_for(int64_t batch);

  Backend& backend_;
  int64_t classes_;
  Tensor probs_, labels_, stats_, host_stats_;
  Tensor bound_labels_;  // labels of the last forward (device)
  Plan* current_ = nullptr;
  int64_t batch_ = 0;
  PerBatch<Plan> plans_;
};

}  // namespace dtrain
