// Softmax + cross-entropy fused in one pass per row (no oneDNN primitive fuses the loss, and
// a separate softmax would read the logits twice). Log-sum-exp with the row maximum subtracted
// keeps it finite for any logits.
#include <cmath>  // exp, log

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace dtrain::cpu {
namespace {

class CpuSoftmaxXent final : public SoftmaxXentOp {
 public:
  explicit CpuSoftmaxXent(const SoftmaxXentSpec& s) : spec_(s) {}

  void forward(const Tensor& logits, const Tensor& labels, const Tensor& probs,
               const Tensor& stats) override {
    const int64_t rows = logits.shape()[0], k = spec_.classes;
    DTRAIN_CHECK(logits.numel() == rows * k && labels.numel() == rows && probs.numel() == rows * k)
        << "softmax_xent: logits " << logits.shape().str() << ", labels " << labels.shape().str();
    DTRAIN_CHECK(stats.numel() >= 2) << "softmax_xent: stats needs 2 floats";
    const float* z = logits.data<float>();
    const int32_t* y = labels.data<int32_t>();
    float* p = probs.data<float>();
    double loss = 0, correct = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* zr = z + r * k;
      float* pr = p + r * k;
      int64_t argmax = 0;
      float max = zr[0];
      for (int64_t j = 1; j < k; ++j)
        if (zr[j] > max) max = zr[j], argmax = j;
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < k; ++j) {
        pr[j] = std::exp(zr[j] - max);
        sum += pr[j];
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j < k; ++j) pr[j] *= inv;
      const int32_t label = y[r];
      DTRAIN_CHECK(label >= 0 && label < k) << "label " << label << " outside [0, " << k << ")";
      loss += std::log(sum) - (zr[label] - max);
      correct += argmax == label ? 1 : 0;
    }
    stats.data<float>()[0] = static_cast<float>(loss);
    stats.data<float>()[1] = static_cast<float>(correct);
  }

  void backward(const Tensor& probs, const Tensor& labels, const Tensor& dlogits,
                float grad_scale) override {
    const int64_t rows = probs.shape()[0], k = spec_.classes;
    const float* p = probs.data<float>();
    const int32_t* y = labels.data<int32_t>();
    float* d = dlogits.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
      for (int64_t j = 0; j < k; ++j) d[r * k + j] = p[r * k + j] * grad_scale;
      d[r * k + y[r]] -= grad_scale;
    }
  }

 private:
  SoftmaxXentSpec spec_;
};

}  // namespace

std::unique_ptr<SoftmaxXentOp> make_softmax_xent(const SoftmaxXentSpec& spec) {
  return std::make_unique<CpuSoftmaxXent>(spec);
}

}  // namespace dtrain::cpu
