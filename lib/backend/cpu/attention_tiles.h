// The register-tiled pieces of the CPU attention (cpu_attention.cpp): a vectorised 2^x, the
// two small matrix products a flash-attention tile needs, and the dropout mask of 16
// consecutive attention weights. Vectors are simd.h's 16 floats.
#pragma once
#include <algorithm>  // min
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
// One round of transpose16: row pairs (i, i + B) swap their off-diagonal B-lane blocks, i.e.
// lo[l] = (l & B) ? hi_row[l − B] : lo_row[l], hi[l] = (l & B) ? hi_row[l] : lo_row[l + B]
// (indices ≥ 16 name the permute's second source).
template <int B>
inline void transpose_round(Vec (&rows)[L]) {
  static constexpr auto kIndex = [] {
    struct {
      int32_t lo[L], hi[L];
    } index{};
    for (int l = 0; l < L; ++l) {
      index.lo[l] = (l & B) ? L + l - B : l;
      index.hi[l] = (l & B) ? L + l : l + B;
    }
    return index;
  }();
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
#endif

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

}  // namespace dtrain::cpu::attention
