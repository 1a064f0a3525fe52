// Plain-C++ codec loops. Each is a single pass with no branches on data and no calls, so that
// GCC vectorises it for the build's -march (check with -fopt-info-vec); std::memcpy moves
// values in and out of unaligned encoded bytes and compiles to plain (vector) loads and stores.
// The library builds with -ffp-contract=off: a multiply followed by an add must stay two
// roundings, as in the AVX-512 kernels, or the two builds would differ in the last bit.
#include <algorithm>  // std::max
#include <bit>        // std::bit_cast
#include <cstring>    // std::memcpy

#include "compress/codec_kernels.h"

namespace dtrain::codec_kernels::portable {

namespace {
constexpr uint32_t kAbsMask = 0x7fffffffu, kInfBits = 0x7f800000u;
constexpr uint16_t kQuietBit16 = 0x0040;  // the top mantissa bit of the upper half
// Adding and subtracting 1.5·2^23 rounds a float of magnitude < 2^22 to an integer, half to even
// (in the default rounding mode), in two vectorisable adds on any x86-64 — unlike nearbyint,
// which needs SSE4.1 to be inlined. Exact: neither add can round away a bit of the integer.
constexpr float kRoundMagic = 12582912.0f;
}  // namespace

void add_f32(const void* in, int64_t n, float* out) {
  const auto* bytes = static_cast<const unsigned char*>(in);
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, bytes + 4 * i, 4);
    out[i] += v;
  }
}

void truncate16_encode(const float* in, int64_t n, void* out) {
  auto* bytes = static_cast<unsigned char*>(out);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(in[i]);
    const bool nan = (bits & kAbsMask) > kInfBits;
    const auto half = static_cast<uint16_t>((bits >> 16) | (nan ? kQuietBit16 : 0));
    std::memcpy(bytes + 2 * i, &half, 2);
  }
}

void truncate16_decode(const void* in, int64_t n, float* out) {
  const auto* bytes = static_cast<const unsigned char*>(in);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t half;
    std::memcpy(&half, bytes + 2 * i, 2);
    out[i] = std::bit_cast<float>(static_cast<uint32_t>(half) << 16);
  }
}

void truncate16_decode_add(const void* in, int64_t n, float* out) {
  const auto* bytes = static_cast<const unsigned char*>(in);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t half;
    std::memcpy(&half, bytes + 2 * i, 2);
    out[i] += std::bit_cast<float>(static_cast<uint32_t>(half) << 16);
  }
}

uint32_t max_abs_bits(const float* in, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::bit_cast<uint32_t>(in[i]) & kAbsMask);
  return m;
}

void quantize8_encode(const float* in, int64_t n, float inv_scale, void* out) {
  auto* q = static_cast<int8_t*>(out);
  for (int64_t i = 0; i < n; ++i) {
    const float rounded = (in[i] * inv_scale + kRoundMagic) - kRoundMagic;
    q[i] = static_cast<int8_t>(static_cast<int32_t>(rounded));
  }
}

void quantize8_decode(const void* in, int64_t n, float scale, float* out) {
  const auto* q = static_cast<const int8_t*>(in);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

void quantize8_decode_add(const void* in, int64_t n, float scale, float* out) {
  const auto* q = static_cast<const int8_t*>(in);
  for (int64_t i = 0; i < n; ++i) {
    out[i] += static_cast<float>(q[i]) * scale;
  }
}

}  // namespace dtrain::codec_kernels::portable
