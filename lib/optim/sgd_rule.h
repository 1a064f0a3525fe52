// The per-element arithmetic of SGD (PyTorch semantics: weight decay, momentum with dampening,
// Nesterov) as an update rule (rule_passes.h), written once for both backends.
// Rounding: the CUDA build does not contract into FMAs (-fmad=false, lib/backend/CMakeLists.txt);
// the CPU build (GCC, -march=native) may, and does so alike wherever the expression is the same.
#pragma once
#include <cstdint>  // int64_t
#include <string>
#include <type_traits>  // integral_constant, bool_constant

#include "backend/pass_buffers.h"  // DTRAIN_HOST_DEVICE

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

// The hyper-parameters as the arithmetic uses them.
struct Coeffs {
  float lr, weight_decay, momentum;
  float keep;  // 1 − dampening: the share of the gradient that enters the momentum
};

inline Coeffs coeffs(float lr, float momentum, float dampening, float weight_decay) {
  return {lr, weight_decay, momentum, 1.0f - dampening};
}

// g + wd·w: the gradient with weight decay.
DTRAIN_HOST_DEVICE inline float decayed(float g, float w, float weight_decay) {
  return g + weight_decay * w;
}
// w − lr·d: one step down the direction d.
DTRAIN_HOST_DEVICE inline float descend(float w, float lr, float d) {
  return w - lr * d;
}

// The rule of kind K: the momentum is its one state (none for plain).
template <Kind K>
struct Rule {
  static constexpr int kStates = K == Kind::plain ? 0 : 1;
  using Coeffs = sgd::Coeffs;
  static std::string name() {
    return K == Kind::plain ? "sgd.plain" : K == Kind::momentum ? "sgd.momentum" : "sgd.nesterov";
  }
  DTRAIN_HOST_DEVICE static float update(float w, float g, float* s, const Coeffs& c) {
    const float gd = decayed(g, w, c.weight_decay);
    if constexpr (K == Kind::plain) {
      return descend(w, c.lr, gd);
    } else {
      const float v = c.momentum * s[0] + c.keep * gd;
      s[0] = v;
      if constexpr (K == Kind::nesterov)
        return descend(w, c.lr, gd + c.momentum * v);
      else
        return descend(w, c.lr, v);
    }
  }
};

// w, g, sum: plain SGD that also keeps what it stepped with, ĝ = g + wd·w (g itself, exactly,
// when !kDecay), stored into sum or (kAdd) added to it — HPSGD's replica step (sgd.h).
template <bool kDecay, bool kAdd>
struct AccumulatePass {
  static constexpr int kBuffers = 3;
  static std::string name() {
    return std::string("sgd.accumulate") + (kDecay ? ".decay" : "") + (kAdd ? ".add" : "");
  }
  float lr, weight_decay;
  DTRAIN_HOST_DEVICE void operator()(int64_t i, float* w, const float* g, float* sum) const {
    const float wi = w[i];
    const float gd = kDecay ? decayed(g[i], wi, weight_decay) : g[i];
    sum[i] = kAdd ? sum[i] + gd : gd;
    w[i] = descend(wi, lr, gd);
  }
};

// Calls run(std::bool_constant<decay>{}, std::bool_constant<add>{}) for AccumulatePass, with
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

}  // namespace dtrain::sgd
