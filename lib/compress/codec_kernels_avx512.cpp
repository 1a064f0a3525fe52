// codec_kernels::best: AVX-512 loops when the build targets AVX-512F and AVX-512BW (as
// -march=native does on this project's machines), the portable loops otherwise. Each vector loop
// leaves its last < 16 (or < 32) elements to the portable loop, which gives bit-identical results.
#include "compress/codec_kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
// GCC 12's AVX-512 headers start unmasked intrinsics from a self-initialised "undefined" vector
// and then warn about it where they are inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>  // AVX-512 intrinsics

namespace dtrain::codec_kernels::best {

namespace {
// Word 2k+1 of the 64 words of (a, b): the upper halves of the 32 floats in a then b, in order.
__m512i upper_halves_index() {
  alignas(64) uint16_t index[32];
  for (int k = 0; k < 32; ++k) index[k] = static_cast<uint16_t>(2 * k + 1);
  return _mm512_load_si512(index);
}

// Sets the quiet bit of the NaN lanes, so that truncation cannot turn a NaN into an Inf.
__m512i quiet_nans(__m512 x) {
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512i bits = _mm512_castps_si512(x);
  return _mm512_mask_or_epi32(bits, nan, bits, _mm512_set1_epi32(0x00400000));
}

__m512 widen_upper(__m256i halves) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16));
}

__m512 dequantize(const int8_t* q, __m512 scale) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)), scale);
}
}  // namespace

void add_f32(const void* in, int64_t n, float* out) {
  const auto* src = static_cast<const unsigned char*>(in);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(src + 4 * i), b = _mm512_loadu_ps(src + 4 * i + 64);
    _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(out + i), a));
    _mm512_storeu_ps(out + i + 16, _mm512_add_ps(_mm512_loadu_ps(out + i + 16), b));
  }
  portable::add_f32(src + 4 * i, n - i, out + i);
}

void truncate16_encode(const float* in, int64_t n, void* out) {
  auto* dst = static_cast<unsigned char*>(out);
  const __m512i index = upper_halves_index();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i a = quiet_nans(_mm512_loadu_ps(in + i));
    const __m512i b = quiet_nans(_mm512_loadu_ps(in + i + 16));
    _mm512_storeu_si512(dst + 2 * i, _mm512_permutex2var_epi16(a, index, b));
  }
  portable::truncate16_encode(in + i, n - i, dst + 2 * i);
}

void truncate16_decode(const void* in, int64_t n, float* out) {
  const auto* src = static_cast<const unsigned char*>(in);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i h = _mm512_loadu_si512(src + 2 * i);
    _mm512_storeu_ps(out + i, widen_upper(_mm512_castsi512_si256(h)));
    _mm512_storeu_ps(out + i + 16, widen_upper(_mm512_extracti64x4_epi64(h, 1)));
  }
  portable::truncate16_decode(src + 2 * i, n - i, out + i);
}

void truncate16_decode_add(const void* in, int64_t n, float* out) {
  const auto* src = static_cast<const unsigned char*>(in);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i h = _mm512_loadu_si512(src + 2 * i);
    const __m512 a = widen_upper(_mm512_castsi512_si256(h));
    const __m512 b = widen_upper(_mm512_extracti64x4_epi64(h, 1));
    _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(out + i), a));
    _mm512_storeu_ps(out + i + 16, _mm512_add_ps(_mm512_loadu_ps(out + i + 16), b));
  }
  portable::truncate16_decode_add(src + 2 * i, n - i, out + i);
}

uint32_t max_abs_bits(const float* in, int64_t n) {
  // Unsigned integer max of the magnitude bits: orders finite floats like their magnitudes and
  // puts Inf and NaN above them, which _mm512_max_ps (NaN-dropping) would not.
  const __m512i mask = _mm512_set1_epi32(0x7fffffff);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;  // 4 chains hide latency
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(in + i), mask));
    m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_loadu_si512(in + i + 16), mask));
    m2 = _mm512_max_epu32(m2, _mm512_and_si512(_mm512_loadu_si512(in + i + 32), mask));
    m3 = _mm512_max_epu32(m3, _mm512_and_si512(_mm512_loadu_si512(in + i + 48), mask));
  }
  for (; i + 16 <= n; i += 16)
    m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(in + i), mask));
  const __m512i m = _mm512_max_epu32(_mm512_max_epu32(m0, m1), _mm512_max_epu32(m2, m3));
  const uint32_t head = _mm512_reduce_max_epu32(m);
  const uint32_t tail = portable::max_abs_bits(in + i, n - i);
  return head > tail ? head : tail;
}

void quantize8_encode(const float* in, int64_t n, float inv_scale, void* out) {
  auto* dst = static_cast<int8_t*>(out);
  const __m512 inv = _mm512_set1_ps(inv_scale);
  // The two in-lane packs leave 128-bit lane k holding dwords (a_k, b_k, c_k, d_k), each four
  // bytes of one source vector; this permutation puts them back in source order.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    // cvtps rounds half to even in the default rounding mode, as the portable loop does.
    const __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(in + i), inv));
    const __m512i b = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(in + i + 16), inv));
    const __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(in + i + 32), inv));
    const __m512i d = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(in + i + 48), inv));
    const __m512i bytes = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
    _mm512_storeu_si512(dst + i, _mm512_permutexvar_epi32(order, bytes));
  }
  for (; i + 16 <= n; i += 16) {
    const __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(in + i), inv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm512_cvtsepi32_epi8(a));
  }
  portable::quantize8_encode(in + i, n - i, inv_scale, dst + i);
}

void quantize8_decode(const void* in, int64_t n, float scale, float* out) {
  const auto* q = static_cast<const int8_t*>(in);
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm512_storeu_ps(out + i, dequantize(q + i, s));
    _mm512_storeu_ps(out + i + 16, dequantize(q + i + 16, s));
  }
  portable::quantize8_decode(q + i, n - i, scale, out + i);
}

void quantize8_decode_add(const void* in, int64_t n, float scale, float* out) {
  const auto* q = static_cast<const int8_t*>(in);
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(out + i), dequantize(q + i, s)));
    _mm512_storeu_ps(out + i + 16,
                     _mm512_add_ps(_mm512_loadu_ps(out + i + 16), dequantize(q + i + 16, s)));
  }
  portable::quantize8_decode_add(q + i, n - i, scale, out + i);
}

const char* isa() {
  return "avx512";
}

}  // namespace dtrain::codec_kernels::best

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#else  // no AVX-512: the portable loops, vectorised by the compiler for the build's target

namespace dtrain::codec_kernels::best {
void add_f32(const void* in, int64_t n, float* out) {
  portable::add_f32(in, n, out);
}
void truncate16_encode(const float* in, int64_t n, void* out) {
  portable::truncate16_encode(in, n, out);
}
void truncate16_decode(const void* in, int64_t n, float* out) {
  portable::truncate16_decode(in, n, out);
}
void truncate16_decode_add(const void* in, int64_t n, float* out) {
  portable::truncate16_decode_add(in, n, out);
}
uint32_t max_abs_bits(const float* in, int64_t n) {
  return portable::max_abs_bits(in, n);
}
void quantize8_encode(const float* in, int64_t n, float inv_scale, void* out) {
  portable::quantize8_encode(in, n, inv_scale, out);
}
void quantize8_decode(const void* in, int64_t n, float scale, float* out) {
  portable::quantize8_decode(in, n, scale, out);
}
void quantize8_decode_add(const void* in, int64_t n, float scale, float* out) {
  portable::quantize8_decode_add(in, n, scale, out);
}
const char* isa() {
  return "portable";
}
}  // namespace dtrain::codec_kernels::best

#endif
