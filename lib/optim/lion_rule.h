// The per-element arithmetic of Lion (Chen et al. 2023, "Symbolic Discovery of Optimization
// Algorithms", Program 1) as an update rule (rule_passes.h), written once for both backends:
//   c ← β1·m + (1 − β1)·g;  w ← w·(1 − lr·wd) − lr·sign(c);  m ← β2·m + (1 − β2)·g
// in the order of the paper's reference PyTorch code (decoupled decay first). The update's size
// is lr in every element, so Lion wants a learning rate 3–10× below AdamW's.
#pragma once
#include <cstdint>
#include <string>

#include "backend/pass_buffers.h"  // DTRAIN_HOST_DEVICE

namespace dtrain::lion {

struct Coeffs {
  float keep;  // 1 − lr·wd: decoupled weight decay
  float lr;
  float beta1, grad_weight1;  // the interpolation that is signed: β1, 1 − β1
  float beta2, grad_weight2;  // the moment's decay: β2, 1 − β2
};

// The scalars in double, rounded once to float (as AdamW's, and as PyTorch hands them over).
inline Coeffs coeffs(float lr, float beta1, float beta2, float weight_decay) {
  return {static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay),
          lr,
          beta1,
          static_cast<float>(1.0 - static_cast<double>(beta1)),
          beta2,
          static_cast<float>(1.0 - static_cast<double>(beta2))};
}

// torch.sign: ±1, and 0 for 0; a NaN stays NaN, so a diverging gradient shows in the weights.
DTRAIN_HOST_DEVICE inline float sign(float x) {
  return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
}

// The moment m is the rule's one state.
struct Rule {
  static constexpr int kStates = 1;
  using Coeffs = lion::Coeffs;
  static std::string name() { return "lion"; }
  DTRAIN_HOST_DEVICE static float update(float w, float g, float* s, const Coeffs& c) {
    const float m = s[0];
    const float direction = sign(c.beta1 * m + c.grad_weight1 * g);
    s[0] = c.beta2 * m + c.grad_weight2 * g;
    return w * c.keep - c.lr * direction;
  }
};

}  // namespace dtrain::lion
