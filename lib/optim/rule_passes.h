// The fused passes of an optimizer written as an element-wise update rule, for any rule R:
//
//   struct R {
//     static constexpr int kStates = 2;   // floats of state per element (AdamW: m and v)
//     struct Coeffs { ... };              // one step's scalars, computed on the host
//     static std::string name();          // "adamw.lerp_low": names its passes
//     DTRAIN_HOST_DEVICE static float update(float w, float g, float* state, const Coeffs& c);
//   };
//
// `update` returns the new weight and updates state[0, kStates) in place. Every pass below is that
// one expression on other inputs — the step, a prediction of the next step, both in one pass,
// the step with its change — so a prediction equals the step it predicts bit for bit. Each pass
// takes the state buffers last. The CPU instantiates them where an optimizer runs them
// (rule_optimizer.h); the CUDA plugin lists them per rule (cuda/optimizer_passes.cu).
#pragma once
#include <cstdint>
#include <string>

#include "backend/pass_buffers.h"  // DTRAIN_HOST_DEVICE

namespace dtrain::rule {

// Element i of the state buffers into s[0, k), and back.
template <class... S>
DTRAIN_HOST_DEVICE inline void load(float* s, [[maybe_unused]] int64_t i, S*... p) {
  int j = 0;
  ((s[j++] = p[i]), ...);
}
template <class... S>
DTRAIN_HOST_DEVICE inline void store(const float* s, [[maybe_unused]] int64_t i, S*... p) {
  int j = 0;
  ((p[i] = s[j++]), ...);
}

// A rule's state of one element (one float more than it needs: no array is empty).
template <class R>
struct State {
  float v[R::kStates + 1];
};

// w, g, state...: the step, in place.
template <class R>
struct StepPass {
  static constexpr int kBuffers = 2 + R::kStates;
  static std::string name() { return R::name() + ".step"; }
  typename R::Coeffs c;
  template <class... S>
  DTRAIN_HOST_DEVICE void operator()(int64_t i, float* w, const float* g, S*... s) const {
    State<R> st;
    load(st.v, i, s...);
    w[i] = R::update(w[i], g[i], st.v, c);
    store(st.v, i, s...);
  }
};

// out, w, g, state...: what the step would write to w, written to out; nothing else changes.
template <class R>
struct PredictPass {
  static constexpr int kBuffers = 3 + R::kStates;
  static std::string name() { return R::name() + ".predict"; }
  typename R::Coeffs c;
  template <class... S>
  DTRAIN_HOST_DEVICE void operator()(int64_t i, float* out, const float* w, const float* g,
                                     S*... s) const {
    State<R> st;
    load(st.v, i, s...);
    out[i] = R::update(w[i], g[i], st.v, c);
  }
};

// w, g, ghat, out, state...: the step with g (coefficients c), then the prediction of the next
// step (coefficients next) from its results with ghat.
template <class R>
struct StepPredictPass {
  static constexpr int kBuffers = 4 + R::kStates;
  static std::string name() { return R::name() + ".step_predict"; }
  typename R::Coeffs c, next;
  template <class... S>
  DTRAIN_HOST_DEVICE void operator()(int64_t i, float* w, const float* g, const float* ghat,
                                     float* out, S*... s) const {
    State<R> st;
    load(st.v, i, s...);
    const float wi = R::update(w[i], g[i], st.v, c);
    w[i] = wi;
    store(st.v, i, s...);
    out[i] = R::update(wi, ghat[i], st.v, next);
  }
};

// w, g, delta, state...: the step, and the change it made (new − old) into delta.
template <class R>
struct StepDeltaPass {
  static constexpr int kBuffers = 3 + R::kStates;
  static std::string name() { return R::name() + ".step_delta"; }
  typename R::Coeffs c;
  template <class... S>
  DTRAIN_HOST_DEVICE void operator()(int64_t i, float* w, const float* g, float* delta,
                                     S*... s) const {
    State<R> st;
    load(st.v, i, s...);
    const float old = w[i];
    const float wi = R::update(old, g[i], st.v, c);
    w[i] = wi;
    store(st.v, i, s...);
    delta[i] = wi - old;
  }
};

// out, w, x, y, state...: the prediction with ĝ = α·x + β·y (axpby's expression), never stored.
template <class R>
struct PredictSumPass {
  static constexpr int kBuffers = 4 + R::kStates;
  static std::string name() { return R::name() + ".predict_sum"; }
  typename R::Coeffs c;
  float alpha, beta;
  template <class... S>
  DTRAIN_HOST_DEVICE void operator()(int64_t i, float* out, const float* w, const float* x,
                                     const float* y, S*... s) const {
    State<R> st;
    load(st.v, i, s...);
    out[i] = R::update(w[i], alpha * x[i] + beta * y[i], st.v, c);
  }
};

// w, g, other, state... (a sum pass): the step with its change Δ, then g ← α·other + g
// (axpby's expression with β = 1); returns Δ, summed with the new g.
template <class R>
struct StepDotPass {
  static constexpr int kBuffers = 3 + R::kStates;
  static constexpr int kSumWith = 1;
  static std::string name() { return R::name() + ".step_dot"; }
  typename R::Coeffs c;
  float alpha;
  template <class... S>
  DTRAIN_HOST_DEVICE float operator()(int64_t i, float* w, float* g, const float* other,
                                      S*... s) const {
    State<R> st;
    load(st.v, i, s...);
    const float old = w[i];
    const float wi = R::update(old, g[i], st.v, c);
    w[i] = wi;
    store(st.v, i, s...);
    g[i] = alpha * other[i] + g[i];
    return wi - old;
  }
};

}  // namespace dtrain::rule

// Every pass of rule R, for a .cu file of the CUDA plugin (DTRAIN_DEVICE_PASSES).
#define DTRAIN_RULE_PASSES(...)                                                                 \
  ::dtrain::rule::StepPass<__VA_ARGS__>, ::dtrain::rule::PredictPass<__VA_ARGS__>,              \
      ::dtrain::rule::StepPredictPass<__VA_ARGS__>, ::dtrain::rule::StepDeltaPass<__VA_ARGS__>, \
      ::dtrain::rule::PredictSumPass<__VA_ARGS__>, ::dtrain::rule::StepDotPass<__VA_ARGS__>
