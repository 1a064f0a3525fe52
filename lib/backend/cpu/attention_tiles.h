// The register-tiled pieces of the CPU attention (cpu_attention.cpp, attention_short.cpp): a
// vectorised 2^x and log2, the two small matrix products a flash-attention tile needs, 16 × 16
// transposes and the reductions of 16 vectors at once, the per-head copies, and the dropout
// mask of 16 consecutive attention weights. Vectors are simd.h's 16 floats; every piece has a
// plain vector-extension path for machines without AVX-512.
#pragma once
#include <algorithm>  // min, fill
#include <cmath>      // ceil, log2
#include <cstdint>

#include "backend/cpu/simd.h"
#include "core/rng.h"  // mix64

namespace dtrain::cpu::attention {

using simd::IVec;
using simd::L;
using simd::Vec;

// v in every lane (a broadcast: `Vec{} + v` would be an addition, which also turns −0 into 0).
inline Vec splat(float v) {
#ifdef __AVX512F__
  return reinterpret_cast<Vec>(_mm512_set1_ps(v));
#else
  Vec r;
  for (int l = 0; l < L; ++l) r[l] = v;
  return r;
#endif
}

// a·b + c in one rounding: the build is ISO C++, which keeps GCC from contracting a·b + c.
inline Vec fma(Vec a, Vec b, Vec c) {
#ifdef __AVX512F__
  return reinterpret_cast<Vec>(_mm512_fmadd_ps(
      reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b), reinterpret_cast<__m512>(c)));
#else
  return a * b + c;
#endif
}

inline Vec max(Vec a, Vec b) {
  return a > b ? a : b;
}

// The lanes of v swapped in pairs of blocks of 8, 4, 2 and 1: the steps of a reduction tree.
// (Shuffles of the vector extension: the intrinsics' own reductions trip GCC 12's
// -Wmaybe-uninitialized inside its headers.)
#ifdef __clang__
#define DTRAIN_SWAP_LANES(v, ...) __builtin_shufflevector(v, v, __VA_ARGS__)
#else
#define DTRAIN_SWAP_LANES(v, ...) __builtin_shuffle(v, IVec{__VA_ARGS__})
#endif
template <class Op>
inline float reduce_lanes(Vec v, Op op) {
  v = op(v, DTRAIN_SWAP_LANES(v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = op(v, DTRAIN_SWAP_LANES(v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = op(v, DTRAIN_SWAP_LANES(v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = op(v, DTRAIN_SWAP_LANES(v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  return v[0];
}
#undef DTRAIN_SWAP_LANES

// The sum and the maximum of the lanes, as trees (a fixed order, a short dependency chain).
inline float lane_sum(Vec v) {
  return reduce_lanes(v, [](Vec a, Vec b) { return a + b; });
}
inline float lane_max(Vec v) {
  return reduce_lanes(v, [](Vec a, Vec b) { return max(a, b); });
}

inline IVec lanes_below(int64_t n) {
  const IVec lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return lane < static_cast<int32_t>(std::min<int64_t>(n, L));
}
// Lanes l < n keep v; the others become 0 (bitwise, so that a NaN there goes too).
inline Vec first_lanes(Vec v, int64_t n) {
  return reinterpret_cast<Vec>(reinterpret_cast<IVec>(v) & lanes_below(n));
}
// Lanes l < n from v, the others from other.
inline Vec first_lanes_or(Vec v, int64_t n, Vec other) {
  return lanes_below(n) ? v : other;
}

#ifdef __AVX512F__
// The permute indices of one round of transpose16 and lane_reductions: row pairs (i, i + B)
// swap their off-diagonal B-lane blocks, i.e. lo[l] = (l & B) ? hi_row[l − B] : lo_row[l],
// hi[l] = (l & B) ? hi_row[l] : lo_row[l + B] (indices ≥ 16 name the permute's second source).
template <int B>
struct RoundIndex {
  int32_t lo[L], hi[L];
  static constexpr RoundIndex make() {
    RoundIndex index{};
    for (int l = 0; l < L; ++l) {
      index.lo[l] = (l & B) ? L + l - B : l;
      index.hi[l] = (l & B) ? L + l : l + B;
    }
    return index;
  }
};

template <int B>
inline void transpose_round(Vec (&rows)[L]) {
  static constexpr RoundIndex<B> kIndex = RoundIndex<B>::make();
  const __m512i lo_sel = _mm512_loadu_si512(kIndex.lo), hi_sel = _mm512_loadu_si512(kIndex.hi);
#pragma GCC unroll 16
  for (int i = 0; i < L; ++i) {
    if (i & B) continue;
    const __m512 a = reinterpret_cast<__m512>(rows[i]);
    const __m512 c = reinterpret_cast<__m512>(rows[i + B]);
    rows[i] = reinterpret_cast<Vec>(_mm512_permutex2var_ps(a, lo_sel, c));
    rows[i + B] = reinterpret_cast<Vec>(_mm512_permutex2var_ps(a, hi_sel, c));
  }
}

// A round of transpose16 whose two halves are combined at once: rows[i] for i < B becomes
// op(lo, hi) of the pair (i, i + B), which holds half-reduced lanes of both rows.
template <int B, class Op>
inline void reduce_round(Vec (&rows)[L], Op op) {
  static constexpr RoundIndex<B> kIndex = RoundIndex<B>::make();
  const __m512i lo_sel = _mm512_loadu_si512(kIndex.lo), hi_sel = _mm512_loadu_si512(kIndex.hi);
#pragma GCC unroll 8
  for (int i = 0; i < B; ++i) {
    const __m512 a = reinterpret_cast<__m512>(rows[i]);
    const __m512 c = reinterpret_cast<__m512>(rows[i + B]);
    rows[i] = op(reinterpret_cast<Vec>(_mm512_permutex2var_ps(a, lo_sel, c)),
                 reinterpret_cast<Vec>(_mm512_permutex2var_ps(a, hi_sel, c)));
  }
}
#endif

// out[r] = the lanes of rows[r] reduced with op, for the 16 vectors (rows is overwritten). Four
// rounds of transpose16 that combine as they go: 30 permutes and 15 operations for 16
// reductions, where one tree each costs 4 and 4. (The result goes to memory: returning a
// vector from the loop of the plain path trips -Wpsabi without AVX-512.)
template <class Op>
inline void lane_reductions(Vec (&rows)[L], Op op, float* out) {
#ifdef __AVX512F__
  reduce_round<8>(rows, op);
  reduce_round<4>(rows, op);
  reduce_round<2>(rows, op);
  reduce_round<1>(rows, op);
  simd::store(out, rows[0]);
#else
  for (int r = 0; r < L; ++r) {
    Vec v = rows[r];
    for (int width = L / 2; width > 0; width /= 2) {
      Vec shifted = v;
      for (int l = 0; l < width; ++l) shifted[l] = v[l + width];
      v = op(v, shifted);
    }
    out[r] = v[0];
  }
#endif
}

// Transposes the 16 × 16 block held in rows[0 … 15] in registers: four rounds that swap the
// off-diagonal blocks of 8, 4, 2 and 1 lanes between row pairs, two two-source permutes per
// pair (a column gathered lane by lane costs sixteen inserts per vector).
inline void transpose16(Vec (&rows)[L]) {
#ifdef __AVX512F__
  transpose_round<8>(rows);
  transpose_round<4>(rows);
  transpose_round<2>(rows);
  transpose_round<1>(rows);
#else
  Vec out[L];
  for (int d = 0; d < L; ++d)
    for (int l = 0; l < L; ++l) out[d][l] = rows[l][d];
  for (int d = 0; d < L; ++d) rows[d] = out[d];
#endif
}

// 2^x, relative error about 1e-7 (a degree-7 Taylor polynomial of 2^f on |f| ≤ ½); x is
// clamped to [−126, 127], so that arguments far below the row's maximum give 2^−126 rather
// than denormals (the callers zero what the causal mask removes).
inline Vec exp2(Vec x) {
  x = x < -126.0f ? splat(-126.0f) : x;
  x = x > 127.0f ? splat(127.0f) : x;
  // Adding and removing 1.5·2^23 rounds to the nearest integer (the build has no fast-math).
  const Vec n = (x + 12582912.0f) - 12582912.0f;
  const Vec f = x - n;
  Vec p = splat(1.5252733804059841e-5f);
  p = fma(p, f, splat(1.5403530393381608e-4f));
  p = fma(p, f, splat(1.3333558146428443e-3f));
  p = fma(p, f, splat(9.6181291076284772e-3f));
  p = fma(p, f, splat(5.5504108664821580e-2f));
  p = fma(p, f, splat(2.4022650695910071e-1f));
  p = fma(p, f, splat(6.9314718055994531e-1f));
  p = fma(p, f, splat(1.0f));
  const IVec bits = (__builtin_convertvector(n, IVec) + 127) << 23;
  return p * reinterpret_cast<Vec>(bits);
}

// 2^x for the whole-head kernels: a degree-5 polynomial of 2^f on |f| ≤ ½ fitted for the least
// maximum relative error (7.5e-8, about 2e-7 evaluated in float: exp2's accuracy, two FMAs
// fewer), with AVX-512's rounding and scaling instructions where there are some: no clamp
// (scalef underflows to 0 and overflows to ∞ by itself), no integer detour. Arguments of −∞ or
// NaN give NaN: the callers mask them.
inline Vec exp2_scaled(Vec x) {
#ifdef __AVX512F__
  // The zero-masked forms: the plain ones trip GCC 12's -Wmaybe-uninitialized in its header.
  const __m512 n = _mm512_maskz_roundscale_ps(0xffff, reinterpret_cast<__m512>(x),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const Vec f = x - reinterpret_cast<Vec>(n);
  Vec p = splat(1.327644451521337e-3f);
  p = fma(p, f, splat(9.67553723603487e-3f));
  p = fma(p, f, splat(5.550713464617729e-2f));
  p = fma(p, f, splat(2.4022120237350464e-1f));
  p = fma(p, f, splat(6.931469440460205e-1f));
  p = fma(p, f, splat(1.0000001192092896f));
  return reinterpret_cast<Vec>(_mm512_maskz_scalef_ps(0xffff, reinterpret_cast<__m512>(p), n));
#else
  return exp2(x);
#endif
}

// log2(x) for positive normal x, to about 1e-7 relative: x = m·2^e with m ∈ [0.75, 1.5)
// (AVX-512's getmant and getexp), log2(m) = 2·atanh(t)/ln 2 with t = (m − 1)/(m + 1), |t| ≤ 1/5,
// the series to t^9. Sixteen row sums' logarithms at once, not sixteen libm calls (each of
// which spilled the caller's vector registers).
inline Vec log2_positive(Vec x) {
#ifdef __AVX512F__
  const __m512 xv = reinterpret_cast<__m512>(x);
  const Vec m = reinterpret_cast<Vec>(
      _mm512_maskz_getmant_ps(0xffff, xv, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_src));
  Vec e = reinterpret_cast<Vec>(_mm512_maskz_getexp_ps(0xffff, xv));
  e = m < 1.0f ? e + 1.0f : e;  // a mantissa below 1 was halved: the exponent is one more
  const Vec t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
  Vec p = splat(1.0f / 9.0f);
  p = fma(p, t2, splat(1.0f / 7.0f));
  p = fma(p, t2, splat(1.0f / 5.0f));
  p = fma(p, t2, splat(1.0f / 3.0f));
  p = fma(p, t2, splat(1.0f));
  return fma(p * t, splat(2.8853900817779268f), e);  // 2/ln 2
#else
  Vec r;
  for (int l = 0; l < L; ++l) r[l] = std::log2(x[l]);
  return r;
#endif
}

// s[r·lds + j] = Σ_d a[r·lda + d]·bt[d·ldb + j] for r < R, j < 16·NV, d < depth: R rows of a
// against 16·NV columns of bt (keys stored transposed, so that a vector holds 16 keys).
template <int R, int NV>
inline void dot_tile(const float* a, int64_t lda, const float* bt, int64_t ldb, int64_t depth,
                     float* s, int64_t lds) {
  Vec acc[R][NV] = {};
  for (int64_t d = 0; d < depth; ++d) {
    Vec b[NV];
    for (int v = 0; v < NV; ++v) b[v] = simd::load(bt + d * ldb + v * L);
    for (int r = 0; r < R; ++r) {
      const Vec ar = splat(a[r * lda + d]);
      for (int v = 0; v < NV; ++v) acc[r][v] = fma(ar, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) simd::store(s + r * lds + v * L, acc[r][v]);
}

// out[r·ldo + j] += Σ_{k ∈ [begin, end)} a[r·ars + k·acs]·x[k·ldx + j] for r < R, j < 16·NV:
// R rows of a coefficient matrix (read with any strides, so also transposed) times rows of x.
template <int R, int NV>
inline void accumulate_tile(float* out, int64_t ldo, const float* a, int64_t ars, int64_t acs,
                            const float* x, int64_t ldx, int64_t begin, int64_t end) {
  Vec acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = simd::load(out + r * ldo + v * L);
  for (int64_t k = begin; k < end; ++k) {
    Vec xv[NV];
    for (int v = 0; v < NV; ++v) xv[v] = simd::load(x + k * ldx + v * L);
    for (int r = 0; r < R; ++r) {
      const Vec ar = splat(a[r * ars + k * acs]);
      for (int v = 0; v < NV; ++v) acc[r][v] = fma(ar, xv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) simd::store(out + r * ldo + v * L, acc[r][v]);
}

// All-ones lanes for the weights kept by dropout among indices first … first + 15: weight i is
// dropped when random_uniform(seed, stream, i) < p, i.e. when the top 24 bits of
// mix64(key + i) (key = mix64(seed ^ mix64(stream))) are below threshold = ⌈p·2^24⌉.
inline IVec kept_lanes(uint64_t key, uint64_t first, uint64_t threshold) {
  IVec keep;
  for (int l = 0; l < L; ++l)
    keep[l] = (dtrain::mix64(key + first + l) >> 40) >= threshold ? -1 : 0;
  return keep;
}

inline Vec select(IVec mask, Vec v) {
  return reinterpret_cast<Vec>(reinterpret_cast<IVec>(v) & mask);
}

// Dropout of the attention weights of one call (ops.h): weight (n, h, t, s) is dropped when
// random_uniform(seed, stream, ((n·heads + h)·T + t)·T + s) < p.
struct DropoutDraw {
  bool on = false;
  uint64_t key = 0;        // mix64(seed ^ mix64(stream)): random_bits = mix64(key + index)
  uint64_t threshold = 0;  // ⌈p·2^24⌉: kept when the 24-bit draw is at least this
  float keep_scale = 1.0f;
  DropoutDraw(bool training, float p, uint64_t seed, uint64_t stream) {
    on = training && p > 0.0f;
    if (!on) return;
    key = dtrain::mix64(seed ^ dtrain::mix64(stream));
    threshold = static_cast<uint64_t>(std::ceil(static_cast<double>(p) * 16777216.0));
    keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  }
};

// rows[t·ld + d] ← src[t·stride + d]·factor for t < count and d < width, and 0 for the
// columns width … up to the next multiple of 16 and the rows count … padded − 1. src is f32 or
// bf16 (E = uint16_t), widened exactly as it is read.
template <class E>
inline void copy_rows(float* rows, int64_t ld, const E* src, int64_t stride, int64_t count,
                      int64_t padded, int64_t width, float factor) {
  const Vec f = splat(factor);
  const bool scaled = factor != 1.0f;
  for (int64_t t = 0; t < count; ++t) {
    float* dst = rows + t * ld;
    const E* in = src + t * stride;
    int64_t d = 0;
    for (; d + L <= width; d += L) {
      const Vec x = simd::load_as_f32(in + d);
      simd::store(dst + d, scaled ? x * f : x);
    }
    if (d < width) {
      const Vec x = simd::load_part_as_f32(in + d, width - d);
      simd::store(dst + d, scaled ? x * f : x);
    }
  }
  const int64_t whole = (width + L - 1) / L * L;
  for (int64_t t = count; t < padded; ++t) std::fill(rows + t * ld, rows + t * ld + whole, 0.0f);
}

// cols[d][t] ← src[t·stride + d] for t < count, d < width ([round_up(width, 16), ld], padding
// zero; ld a multiple of 16), in blocks of 16 × 16 transposed in registers: whole vectors are
// read and written. src is f32 or bf16 (E = uint16_t), widened exactly as it is read.
template <class E>
inline void copy_transposed(float* cols, int64_t ld, const E* src, int64_t stride, int64_t count,
                            int64_t width) {
  Vec block[L];
  for (int64_t t0 = 0; t0 < ld; t0 += L) {
    const int64_t rows = std::min<int64_t>(L, count - t0);
    for (int64_t d0 = 0; d0 < width; d0 += L) {
      const int64_t part = std::min<int64_t>(L, width - d0);
      const E* in = src + t0 * stride + d0;
      if (rows == L && part == L) {  // a whole block: plain loads, no per-row tests
#pragma GCC unroll 16
        for (int64_t l = 0; l < L; ++l) block[l] = simd::load_as_f32(in + l * stride);
      } else {
#pragma GCC unroll 16
        for (int64_t l = 0; l < L; ++l)
          block[l] = l < rows ? simd::load_part_as_f32(in + l * stride, part) : Vec{};
      }
      transpose16(block);
#pragma GCC unroll 16
      for (int64_t d = 0; d < L; ++d) simd::store(cols + (d0 + d) * ld + t0, block[d]);
    }
  }
}

}  // namespace dtrain::cpu::attention
