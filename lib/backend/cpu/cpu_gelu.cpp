// GELU, PyTorch's exact (erf) and tanh forms, forward and backward (which reads the input).
// On AVX-512 machines a vectorised kernel of our own (one exponential per element, shared by the
// value and the slope; ~33 vector instructions per 16 elements) runs at the memory's pace for a
// GPT's activations, 1.2-1.5x oneDNN's primitives and as accurate; elsewhere oneDNN's
// gelu_erf / gelu_tanh primitives do the work.
// In bf16 (GeluSpec::dtype) the kernel reads bf16, computes in f32 and rounds once as it stores
// y or dx; builds without AVX-512 (where bf16 training is unavailable anyway) take a scalar loop
// over the same formulas as PyTorch.
#include <cmath>             // erf, tanh, exp: the scalar bf16 path
#include <initializer_list>  // check_dtypes

#include "backend/cpu/bf16.h"  // bf16_t, conversions
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"  // DTRAIN_CHECK

#ifdef __AVX512F__
#include "backend/cpu/simd.h"  // Vec, load, store, masked tails, bf16 widening and rounding
#endif

namespace dtrain::cpu {
namespace {

#ifdef __AVX512F__
using simd::Vec;

inline __m512 m(Vec v) {
  return reinterpret_cast<__m512>(v);
}
inline Vec v(__m512 m) {
  return reinterpret_cast<Vec>(m);
}
inline Vec vmin(Vec a, float b) {
  return v(_mm512_maskz_min_ps(0xffff, m(a), _mm512_set1_ps(b)));
}
inline Vec vmax(Vec a, float b) {
  return v(_mm512_maskz_max_ps(0xffff, m(a), _mm512_set1_ps(b)));
}

// e^a for a in [-200, 88] (callers clamp): a = n ln2 + r with |r| <= ln2/2, e^r by its Taylor
// series to r^7 (truncation below 1e-8 relative), times 2^n by vscalefps, which goes to exactly
// 0 below float's range (so ∞·0 never arises for huge inputs); 88 keeps e^a finite.
inline Vec exp_clamped(Vec a) {
  const Vec n =
      v(_mm512_maskz_roundscale_ps(0xffff, m(a * 1.44269504f), _MM_FROUND_TO_NEAREST_INT));
  const Vec r = (a - n * 0.693145752f) - n * 1.42860677e-6f;  // ln2 in two parts: r is exact
  Vec p = Vec{} + 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return v(_mm512_maskz_scalef_ps(0xffff, m(p), m(n)));
}

// 1/d for normal positive d (the quotients below): AVX-512's 14-bit estimate and one Newton
// step, within ~1 ulp. vdivps would be the loop's bottleneck (one per ~16 cycles).
inline Vec reciprocal(Vec d) {
  const Vec r = v(_mm512_maskz_rcp14_ps(0xffff, m(d)));
  return r * (2.0f - d * r);
}

// Φ(x) and x·φ(x) for the exact form. Φ(-|x|) = 0.5·erfc(|x|/√2) is Abramowitz & Stegun's
// 7.1.26 rational form (absolute error below 1.5e-7 on erfc, i.e. ~1 float ulp of Φ near 0.5;
// its coefficients halved here) times e^{-x²/2}, which the derivative's density reuses. Past
// |x| = 20 the density is exactly 0 (the exponent is clamped at -200), so x·φ stays 0 for huge x.
struct ErfParts {
  Vec cdf, x_pdf;
};
inline ErfParts erf_parts(Vec x) {
  const Vec ax = v(_mm512_abs_ps(m(x)));
  const Vec e = exp_clamped(vmax(x * (x * -0.5f), -200.0f));
  const Vec t = reciprocal(vmin(ax, 20.0f) * (0.3275911f * 0.70710678f) + 1.0f);
  Vec poly = Vec{} + 0.5f * 1.061405429f;
  poly = poly * t - 0.5f * 1.453152027f;
  poly = poly * t + 0.5f * 1.421413741f;
  poly = poly * t - 0.5f * 0.284496736f;
  poly = poly * t + 0.5f * 0.254829592f;
  const Vec lower_tail = (poly * t) * e;  // Φ(-|x|)
  return {x >= 0 ? 1.0f - lower_tail : lower_tail, x * e * 0.398942280f};
}

// The tanh form: 0.5·(1 + tanh u) = s = 1 / (1 + e^{-2u}), u = √(2/π)(x + 0.044715x³), and
// 0.5·(1 - tanh²u) = 2s(1-s) with 1 - s = e^{-2u}·s, exact in the saturated tail as well.
// Past |x| = 20 both have saturated; x is clamped there so that x³ stays finite.
struct TanhParts {
  Vec s, ds;  // s and d(x·s)/dx - s
};
inline TanhParts tanh_parts(Vec x) {
  constexpr float c = 0.797884561f, k = 0.044715f;
  const Vec xc = vmin(vmax(x, -20.0f), 20.0f);
  const Vec xc2 = xc * xc;
  const Vec e = exp_clamped(vmax(vmin(xc * (-2.0f * c) * (1.0f + k * xc2), 88.0f), -200.0f));
  const Vec s = reciprocal(1.0f + e);
  const Vec ds = (e * s) * s * (2.0f * c) * xc * (1.0f + 3.0f * k * xc2);  // e·s <= 1: finite
  return {s, ds};
}

template <bool kTanh>
inline Vec gelu_value(Vec x) {
  if constexpr (kTanh)
    return x * tanh_parts(x).s;
  else
    return x * erf_parts(x).cdf;
}
template <bool kTanh>
inline Vec gelu_slope(Vec x) {
  if constexpr (kTanh) {
    const TanhParts p = tanh_parts(x);
    return p.s + p.ds;
  } else {
    const ErfParts p = erf_parts(x);
    return p.cdf + p.x_pdf;
  }
}

// Chunks of 16 Ki elements over the team (small buffers stay on this thread).
template <typename Body>
void for_each_chunk(int64_t n, int threads, Body body) {
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (threads > 1 && chunks > 1) num_threads(threads)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
    int64_t i = begin;
    for (; i + simd::L <= end; i += simd::L) body(i, simd::L);
    if (i < end) body(i, end - i);
  }
}

// E: float, or bf16 (bf16_t), widened as it is loaded and rounded as it is stored.
template <bool kTanh, class E>
void forward_simd(const E* x, E* y, int64_t n, int threads) {
  for_each_chunk(n, threads, [&](int64_t i, int64_t lanes) {
    if (lanes == simd::L)
      simd::store_from_f32(y + i, gelu_value<kTanh>(simd::load_as_f32(x + i)));
    else
      simd::store_part_from_f32(y + i, gelu_value<kTanh>(simd::load_part_as_f32(x + i, lanes)),
                                lanes);
  });
}
template <bool kTanh, class E>
void backward_simd(const E* x, const E* dy, E* dx, int64_t n, int threads) {
  for_each_chunk(n, threads, [&](int64_t i, int64_t lanes) {
    if (lanes == simd::L) {
      simd::store_from_f32(dx + i,
                           simd::load_as_f32(dy + i) * gelu_slope<kTanh>(simd::load_as_f32(x + i)));
    } else {
      const Vec g = simd::load_part_as_f32(dy + i, lanes);
      simd::store_part_from_f32(dx + i, g * gelu_slope<kTanh>(simd::load_part_as_f32(x + i, lanes)),
                                lanes);
    }
  });
}

template <class E>
void forward_simd(bool tanh, const Tensor& x, const Tensor& y, int threads) {
  if (tanh)
    forward_simd<true>(x.data<E>(), y.data<E>(), x.numel(), threads);
  else
    forward_simd<false>(x.data<E>(), y.data<E>(), x.numel(), threads);
}
template <class E>
void backward_simd(bool tanh, const Tensor& x, const Tensor& dy, const Tensor& dx, int threads) {
  if (tanh)
    backward_simd<true>(x.data<E>(), dy.data<E>(), dx.data<E>(), x.numel(), threads);
  else
    backward_simd<false>(x.data<E>(), dy.data<E>(), dx.data<E>(), x.numel(), threads);
}
#else
// GELU's value and slope at x, PyTorch's formulas in f32 (the bf16 path without AVX-512).
float gelu_value(bool tanh, float x) {
  if (tanh) {
    const float u = 0.797884561f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + std::tanh(u));
  }
  return 0.5f * x * (1.0f + std::erf(x * 0.707106781f));
}
float gelu_slope(bool tanh, float x) {
  if (tanh) {
    const float u = 0.797884561f * (x + 0.044715f * x * x * x);
    const float t = std::tanh(u);
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * 0.797884561f * (1.0f + 3.0f * 0.044715f * x * x);
  }
  return 0.5f * (1.0f + std::erf(x * 0.707106781f)) + x * 0.398942280f * std::exp(-0.5f * x * x);
}
#endif

class CpuGelu final : public GeluOp {
 public:
  CpuGelu(DnnlContext& ctx, const GeluSpec& spec, const int& threads)
      : tanh_(spec.approximate == GeluApproximation::tanh),
        bf16_(spec.dtype == DType::bf16),
        threads_(threads),
        eltwise_(ctx,
                 tanh_ ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf,
                 false, spec.shape.numel(), "gelu") {}
  void forward(const Tensor& x, const Tensor& y) override {
    check_dtypes({&x, &y});
#ifdef __AVX512F__
    if (bf16_)
      forward_simd<bf16_t>(tanh_, x, y, threads_);
    else
      forward_simd<float>(tanh_, x, y, threads_);
#else
    if (bf16_) {
      const bf16_t* xp = x.data<bf16_t>();
      bf16_t* yp = y.data<bf16_t>();
      for (int64_t i = 0; i < x.numel(); ++i)
        yp[i] = f32_to_bf16(gelu_value(tanh_, bf16_to_f32(xp[i])));
      return;
    }
    eltwise_.forward(x, y);
#endif
  }
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx) override {
    check_dtypes({&x, &dy, &dx});
#ifdef __AVX512F__
    if (bf16_)
      backward_simd<bf16_t>(tanh_, x, dy, dx, threads_);
    else
      backward_simd<float>(tanh_, x, dy, dx, threads_);
#else
    if (bf16_) {
      const bf16_t* xp = x.data<bf16_t>();
      const bf16_t* g = dy.data<bf16_t>();
      bf16_t* d = dx.data<bf16_t>();
      for (int64_t i = 0; i < x.numel(); ++i)
        d[i] = f32_to_bf16(bf16_to_f32(g[i]) * gelu_slope(tanh_, bf16_to_f32(xp[i])));
      return;
    }
    eltwise_.backward(x, dy, dx);
#endif
  }

 private:
  void check_dtypes(std::initializer_list<const Tensor*> tensors) const {
    const DType want = bf16_ ? DType::bf16 : DType::f32;
    for (const Tensor* t : tensors)
      DTRAIN_CHECK(t->dtype() == want)
          << "gelu: a " << dtype_name(t->dtype()) << " tensor for a " << dtype_name(want) << " op";
  }

  bool tanh_;
  bool bf16_;
  const int& threads_;  // the backend's, which may change after the op is made
  DnnlEltwise eltwise_;
};

}  // namespace

std::unique_ptr<GeluOp> make_gelu(DnnlContext& ctx, const GeluSpec& spec, const int& threads) {
  DTRAIN_CHECK(spec.dtype == DType::f32 || spec.dtype == DType::bf16)
      << "gelu: " << dtype_name(spec.dtype) << " is not supported";
  return std::make_unique<CpuGelu>(ctx, spec, threads);
}

}  // namespace dtrain::cpu
