// 16-float vectors for the hand-written CPU kernels (direct convolution, pooling), as GCC/Clang
// vector extensions: one AVX-512 register with -march=native on AVX-512 machines, pairs of
// AVX2 registers elsewhere, always correct. Row tails use AVX-512 masked loads and stores where
// available, element loops otherwise.
#pragma once
#include <cstdint>  // int64_t
#include <cstring>  // memcpy: unaligned vector loads and stores

#ifdef __AVX512F__
#include <immintrin.h>  // masked loads and stores
#endif

// Without AVX-512, GCC notes at every use that passing 64-byte vectors by value has no fixed
// ABI; the kernels including this header pass them only to inline helpers of their own file,
// never across a library boundary, so the note is off for them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace dtrain::cpu::simd {

constexpr int L = 16;  // floats per vector
typedef float Vec __attribute__((vector_size(64)));
typedef int32_t IVec __attribute__((vector_size(64)));

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof v);
}
inline void store(int32_t* p, IVec v) {
  std::memcpy(p, &v, sizeof v);
}

// The first n lanes (0 ≤ n ≤ 16); the other lanes read as 0 and are not written.
inline Vec load_part(const float* p, int64_t n) {
#ifdef __AVX512F__
  return reinterpret_cast<Vec>(_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p));
#else
  Vec v{};
  for (int64_t l = 0; l < n; ++l) v[l] = p[l];
  return v;
#endif
}
inline IVec load_part(const int32_t* p, int64_t n) {
#ifdef __AVX512F__
  return reinterpret_cast<IVec>(_mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << n) - 1), p));
#else
  IVec v{};
  for (int64_t l = 0; l < n; ++l) v[l] = p[l];
  return v;
#endif
}
inline void store_part(float* p, Vec v, int64_t n) {
#ifdef __AVX512F__
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), reinterpret_cast<__m512>(v));
#else
  for (int64_t l = 0; l < n; ++l) p[l] = v[l];
#endif
}
inline void store_part(int32_t* p, IVec v, int64_t n) {
#ifdef __AVX512F__
  _mm512_mask_storeu_epi32(p, static_cast<__mmask16>((1u << n) - 1), reinterpret_cast<__m512i>(v));
#else
  for (int64_t l = 0; l < n; ++l) p[l] = v[l];
#endif
}

// Lanes 0, 2, …, 30 (1, 3, …, 31) of the 32 floats lo:hi: the even (odd) columns of a row.
inline Vec even_lanes(Vec lo, Vec hi) {
#ifdef __clang__
  return __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
#else
  return __builtin_shuffle(lo, hi, IVec{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30});
#endif
}
inline Vec odd_lanes(Vec lo, Vec hi) {
#ifdef __clang__
  return __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#else
  return __builtin_shuffle(lo, hi, IVec{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31});
#endif
}
// a0 b0 a1 b1 … a7 b7 (a8 b8 … a15 b15): the inverse of even_lanes / odd_lanes.
inline Vec interleave_low(Vec a, Vec b) {
#ifdef __clang__
  return __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
#else
  return __builtin_shuffle(a, b, IVec{0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23});
#endif
}
inline Vec interleave_high(Vec a, Vec b) {
#ifdef __clang__
  return __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15,
                                 31);
#else
  return __builtin_shuffle(a, b,
                           IVec{8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31});
#endif
}

inline float lane_sum(Vec v) {
  float s = 0;
  for (int l = 0; l < L; ++l) s += v[l];
  return s;
}

// The lanes' sum as a tree (halves added, four times): a few cycles where lane_sum's chain of 16
// additions takes tens — for reductions once per short row. A fixed order: the same bits always.
inline float tree_sum(Vec v) {
#ifdef __clang__
  v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1);
  v += __builtin_shufflevector(v, v, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
#else
  v += __builtin_shuffle(v, IVec{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
  v += __builtin_shuffle(v, IVec{4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3});
  v += __builtin_shuffle(v, IVec{2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1});
  v += __builtin_shuffle(v, IVec{1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0});
#endif
  return v[0];
}

// ---- bfloat16 storage (cpu/bf16.h: the upper 16 bits of an f32) -------------------------
// Kernels that store activations in bf16 widen 16 of them to a Vec as they load (exact) and
// round a Vec to nearest even as they store, the bits cpu/bf16.h's f32_to_bf16 gives.
typedef uint16_t HVec __attribute__((vector_size(32)));  // 16 bf16 values
typedef uint32_t UVec __attribute__((vector_size(64)));

inline Vec widen_bf16(HVec h) {
  return reinterpret_cast<Vec>(__builtin_convertvector(h, UVec) << 16);
}
inline HVec narrow_bf16(Vec v) {
  const UVec u = reinterpret_cast<UVec>(v);
  const UVec rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const UVec quiet_nan = (u >> 16) | 0x40u;  // a NaN stays a NaN (rounding could make it ∞)
  return __builtin_convertvector((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded, HVec);
}

inline Vec load_bf16(const uint16_t* p) {
  HVec h;
  std::memcpy(&h, p, sizeof h);
  return widen_bf16(h);
}
inline void store_bf16(uint16_t* p, Vec v) {
  const HVec h = narrow_bf16(v);
  std::memcpy(p, &h, sizeof h);
}
// The first n lanes (0 ≤ n ≤ 16); the other lanes read as 0 and are not written.
inline Vec load_part_bf16(const uint16_t* p, int64_t n) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return widen_bf16(
      reinterpret_cast<HVec>(_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), p)));
#else
  HVec h{};
  for (int64_t l = 0; l < n; ++l) h[l] = p[l];
  return widen_bf16(h);
#endif
}
inline void store_part_bf16(uint16_t* p, Vec v, int64_t n) {
  const HVec h = narrow_bf16(v);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  _mm256_mask_storeu_epi16(p, static_cast<__mmask16>((1u << n) - 1), reinterpret_cast<__m256i>(h));
#else
  for (int64_t l = 0; l < n; ++l) p[l] = h[l];
#endif
}

// The same for kernels templated on their activations' type (float or bf16's uint16_t).
inline Vec load_as_f32(const float* p) {
  return load(p);
}
inline Vec load_as_f32(const uint16_t* p) {
  return load_bf16(p);
}
inline Vec load_part_as_f32(const float* p, int64_t n) {
  return load_part(p, n);
}
inline Vec load_part_as_f32(const uint16_t* p, int64_t n) {
  return load_part_bf16(p, n);
}
inline void store_from_f32(float* p, Vec v) {
  store(p, v);
}
inline void store_from_f32(uint16_t* p, Vec v) {
  store_bf16(p, v);
}
inline void store_part_from_f32(float* p, Vec v, int64_t n) {
  store_part(p, v, n);
}
inline void store_part_from_f32(uint16_t* p, Vec v, int64_t n) {
  store_part_bf16(p, v, n);
}

}  // namespace dtrain::cpu::simd
