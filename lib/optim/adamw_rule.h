// The per-element arithmetic of AdamW (torch.optim.AdamW's single-tensor path) as an update rule
// (rule_passes.h), written once for both backends. The scalars PyTorch computes in double on the
// host (the bias corrections, the step size, the decay factor) are computed here in double too
// and then rounded to float, as PyTorch does when it passes them to its float kernels.
#pragma once
#include <cmath>    // pow, sqrt, sqrtf
#include <cstdint>  // int64_t
#include <string>

#include "backend/pass_buffers.h"  // DTRAIN_HOST_DEVICE

namespace dtrain::adamw {

// The hyper-parameters of one step as the element arithmetic uses them.
struct Coeffs {
  float keep;           // 1 − lr·wd: decoupled weight decay
  float beta1, beta2;   // the moments' decay rates
  float grad_weight1;   // 1 − β1: the weight of lerp(m, g, 1 − β1)
  float grad_weight2;   // 1 − β2
  float neg_step_size;  // −lr / (1 − β1^t)
  float bias2_sqrt;     // √(1 − β2^t)
  float eps;
};

inline Coeffs coeffs(float lr, float beta1, float beta2, float eps, float weight_decay,
                     int64_t step) {
  const double t = static_cast<double>(step);
  const double bias1 = 1.0 - std::pow(static_cast<double>(beta1), t);
  const double bias2 = 1.0 - std::pow(static_cast<double>(beta2), t);
  return {static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay),
          beta1,
          beta2,
          static_cast<float>(1.0 - static_cast<double>(beta1)),
          static_cast<float>(1.0 - static_cast<double>(beta2)),
          static_cast<float>(-static_cast<double>(lr) / bias1),
          static_cast<float>(std::sqrt(bias2)),
          eps};
}

// PyTorch's lerp(start, end, weight): the form it picks by weight keeps the result exact at
// both ends. The weight is the same for every element of a step, so the form is a template
// argument: a loop over elements then has no branch and vectorises.
template <bool kWeightBelowHalf>
DTRAIN_HOST_DEVICE inline float lerp(float start, float end, float weight) {
  if constexpr (kWeightBelowHalf) return start + weight * (end - start);
  return end - (end - start) * (1.0f - weight);
}

// Which lerp form a step's coefficients take.
DTRAIN_HOST_DEVICE inline bool weight_below_half(const Coeffs& c) {
  return c.grad_weight1 < 0.5f;
}

// The new weight of one AdamW step of weight w with gradient g, in PyTorch's order:
//   w ← w·(1 − lr·wd);  m ← lerp(m, g, 1 − β1);  v ← β2·v + (1 − β2)·g·g;
//   w ← w − step_size · m / (√v / √(1 − β2^t) + ε);
// m and v updated in place. The one expression that step, predict and step_predict share, so
// that a prediction equals the step it predicts bit for bit.
// kWeightBelowHalf must equal weight_below_half(c).
template <bool kWeightBelowHalf>
DTRAIN_HOST_DEVICE inline float update(float w, float g, float& m, float& v, const Coeffs& c) {
  const float wi = w * c.keep;
  const float mi = lerp<kWeightBelowHalf>(m, g, c.grad_weight1);
  const float vi = v * c.beta2 + c.grad_weight2 * g * g;
#ifdef __CUDA_ARCH__
  const float denom = ::sqrtf(vi) / c.bias2_sqrt + c.eps;
#else
  const float denom = std::sqrt(vi) / c.bias2_sqrt + c.eps;
#endif
  m = mi;
  v = vi;
  return wi + c.neg_step_size * (mi / denom);
}

// The rule with the lerp form fixed: m and v are its two states.
template <bool kWeightBelowHalf>
struct Rule {
  static constexpr int kStates = 2;
  using Coeffs = adamw::Coeffs;
  static std::string name() { return kWeightBelowHalf ? "adamw.lerp_low" : "adamw.lerp_high"; }
  DTRAIN_HOST_DEVICE static float update(float w, float g, float* s, const Coeffs& c) {
    return adamw::update<kWeightBelowHalf>(w, g, s[0], s[1], c);
  }
};

}  // namespace dtrain::adamw
