// The per-element arithmetic of SGD (PyTorch semantics: weight decay, momentum with dampening,
// Nesterov), written once for both backends: the CPU loops (cpu/cpu_backend.cpp) and the CUDA
// kernels (cuda/elementwise.cu) only run these functions over their buffers. A prediction is
// the step's own expression on other inputs, so it equals the step it predicts bit for bit.
// Rounding: the CUDA build does not contract into FMAs (-fmad=false, lib/backend/CMakeLists.txt);
// the CPU build (GCC, -march=native) may, and does so alike wherever the expression is the same.
#pragma once
#include <cstdint>      // int64_t
#include <type_traits>  // integral_constant, bool_constant

#ifdef __CUDACC__
#define DTRAIN_HOST_DEVICE __host__ __device__
#else
#define DTRAIN_HOST_DEVICE
#endif

namespace dtrain::sgd {

// Which update: without a momentum buffer, heavy-ball momentum, or Nesterov's look-ahead.
enum class Kind { plain, momentum, nesterov };

inline Kind kind_of(float momentum, bool nesterov) {
  return momentum == 0.0f ? Kind::plain : nesterov ? Kind::nesterov : Kind::momentum;
}

// Calls run(std::integral_constant<Kind, k>{}), so that each kind gets a loop (or kernel) of its
// own without branches inside.
template <class Run>
void with_kind(Kind k, Run&& run) {
  switch (k) {
    case Kind::plain:
      return run(std::integral_constant<Kind, Kind::plain>{});
    case Kind::momentum:
      return run(std::integral_constant<Kind, Kind::momentum>{});
    case Kind::nesterov:
      return run(std::integral_constant<Kind, Kind::nesterov>{});
  }
}

// Calls run(std::bool_constant<decay>{}, std::bool_constant<add>{}) for step_accumulate, with
// decay = (weight_decay != 0): without weight decay, ĝ is g exactly.
template <class Run>
void with_accumulate_flags(float weight_decay, bool add, Run&& run) {
  if (weight_decay != 0.0f) {
    if (add) return run(std::true_type{}, std::true_type{});
    return run(std::true_type{}, std::false_type{});
  }
  if (add) return run(std::false_type{}, std::true_type{});
  return run(std::false_type{}, std::false_type{});
}

// The hyper-parameters as the arithmetic uses them.
struct Coeffs {
  float lr, weight_decay, momentum;
  float keep;  // 1 − dampening: the share of the gradient that enters the momentum
};

inline Coeffs coeffs(float lr, float momentum, float dampening, float weight_decay) {
  return {lr, weight_decay, momentum, 1.0f - dampening};
}

// ---- on values ----------------------------------------------------------------------------
// g + wd·w: the gradient with weight decay.
DTRAIN_HOST_DEVICE inline float decayed(float g, float w, float weight_decay) {
  return g + weight_decay * w;
}
// w − lr·d: one step down the direction d.
DTRAIN_HOST_DEVICE inline float descend(float w, float lr, float d) {
  return w - lr * d;
}

// The new weight from weight w and gradient g; v is the momentum, updated (unused for plain).
template <Kind K>
DTRAIN_HOST_DEVICE inline float update(float w, float g, float& v, const Coeffs& c) {
  const float gd = decayed(g, w, c.weight_decay);
  if constexpr (K == Kind::plain) {
    return descend(w, c.lr, gd);
  } else {
    v = c.momentum * v + c.keep * gd;
    if constexpr (K == Kind::nesterov)
      return descend(w, c.lr, gd + c.momentum * v);
    else
      return descend(w, c.lr, v);
  }
}

// ---- on element i of flat buffers (v may be null for plain) ------------------------------
template <Kind K>
DTRAIN_HOST_DEVICE inline float momentum_at(const float* v, int64_t i) {
  if constexpr (K == Kind::plain)
    return 0.0f;
  else
    return v[i];
}

// Backend::sgd_step: w and v in place.
template <Kind K>
DTRAIN_HOST_DEVICE inline void step(int64_t i, float* w, const float* g, float* v,
                                    const Coeffs& c) {
  float vi = momentum_at<K>(v, i);
  w[i] = update<K>(w[i], g[i], vi, c);
  if constexpr (K != Kind::plain) v[i] = vi;
}

// Backend::sgd_predict: what step would write to w, written to out instead.
template <Kind K>
DTRAIN_HOST_DEVICE inline void predict(int64_t i, float* out, const float* w, const float* g,
                                       const float* v, const Coeffs& c) {
  float vi = momentum_at<K>(v, i);
  out[i] = update<K>(w[i], g[i], vi, c);
}

// Backend::sgd_step_predict: step with g, then predict from its results with ghat.
template <Kind K>
DTRAIN_HOST_DEVICE inline void step_predict(int64_t i, float* w, const float* g, float* v,
                                            const float* ghat, float* out, const Coeffs& c) {
  float vi = momentum_at<K>(v, i);
  const float wi = update<K>(w[i], g[i], vi, c);
  w[i] = wi;
  if constexpr (K != Kind::plain) v[i] = vi;
  out[i] = update<K>(wi, ghat[i], vi, c);
}

// Backend::sgd_step_delta: step, and the change it made (new − old) into delta.
template <Kind K>
DTRAIN_HOST_DEVICE inline void step_delta(int64_t i, float* w, const float* g, float* v,
                                          float* delta, const Coeffs& c) {
  float vi = momentum_at<K>(v, i);
  const float old = w[i];
  const float wi = update<K>(old, g[i], vi, c);
  w[i] = wi;
  if constexpr (K != Kind::plain) v[i] = vi;
  delta[i] = wi - old;
}

// Backend::sgd_predict_sum: predict with ĝ = α·x + β·y (axpby's expression), never stored.
template <Kind K>
DTRAIN_HOST_DEVICE inline void predict_sum(int64_t i, float* out, const float* w, float alpha,
                                           const float* x, float beta, const float* y,
                                           const float* v, const Coeffs& c) {
  float vi = momentum_at<K>(v, i);
  out[i] = update<K>(w[i], alpha * x[i] + beta * y[i], vi, c);
}

// Backend::sgd_step_accumulate: plain SGD with ĝ = g + wd·w (g itself, exactly, when !kDecay),
// ĝ stored into sum or added to it.
template <bool kDecay, bool kAdd>
DTRAIN_HOST_DEVICE inline void step_accumulate(int64_t i, float* w, const float* g, float* sum,
                                               float lr, float weight_decay) {
  const float wi = w[i];
  const float gd = kDecay ? decayed(g[i], wi, weight_decay) : g[i];
  sum[i] = kAdd ? sum[i] + gd : gd;
  w[i] = descend(wi, lr, gd);
}

}  // namespace dtrain::sgd
