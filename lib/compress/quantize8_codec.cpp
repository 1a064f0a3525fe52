// Quantize8Codec: one float scale per block, then one int8 per value (Pipe-SGD §3.2).
#include <algorithm>  // min
#include <bit>        // std::bit_cast
#include <cfloat>     // FLT_MIN
#include <cmath>      // std::isfinite, std::nextafter
#include <cstring>    // std::memcpy, std::memset
#include <limits>     // quiet_NaN

#include "compress/codec_kernels.h"
#include "compress/codecs.h"

namespace dtrain {

namespace {
constexpr float kLevels = 127.0f;  // q ∈ [−127, 127]: symmetric, −128 unused
constexpr uint32_t kInfBits = 0x7f800000u;
// Below this largest magnitude the scale M/127 would be subnormal (losing relative precision)
// and 127/M could overflow; such blocks are sent as zeros.
constexpr float kMinMaxAbs = kLevels * FLT_MIN;
constexpr size_t kHeaderBytes = sizeof(float);
constexpr int64_t kScaleBlock = Quantize8Codec::kScaleBlock;
}  // namespace

size_t Quantize8Codec::encoded_bytes(int64_t n) const {
  const int64_t blocks = (n + kScaleBlock - 1) / kScaleBlock;
  return static_cast<size_t>(blocks) * kHeaderBytes + static_cast<size_t>(n) * sizeof(int8_t);
}

namespace {

// One scale block: its scale, then its n ≤ kScaleBlock values.
void encode_block(const float* in, int64_t n, unsigned char* bytes) {
  const uint32_t max_bits = codec_kernels::best::max_abs_bits(in, n);
  const auto max_abs = std::bit_cast<float>(max_bits);
  float scale = 0.0f;
  if (max_bits >= kInfBits) {
    scale = std::numeric_limits<float>::quiet_NaN();  // every element decodes to NaN
  } else if (max_abs >= kMinMaxAbs) {
    scale = max_abs / kLevels;
    // Only for M = FLT_MAX does M/127 round up far enough that 127·s overflows to Inf.
    if (!std::isfinite(kLevels * scale)) scale = std::nextafter(scale, 0.0f);
    codec_kernels::best::quantize8_encode(in, n, kLevels / max_abs, bytes + kHeaderBytes);
  }
  std::memcpy(bytes, &scale, kHeaderBytes);
  if (!(scale > 0.0f)) std::memset(bytes + kHeaderBytes, 0, static_cast<size_t>(n));
}

// body(first element, elements, the block's encoding, its scale) for each scale block.
template <typename Body>
void for_each_encoded_block(const void* in, int64_t n, Body body) {
  const auto* bytes = static_cast<const unsigned char*>(in);
  for (int64_t at = 0; at < n; at += kScaleBlock) {
    const int64_t count = std::min(kScaleBlock, n - at);
    float scale;
    std::memcpy(&scale, bytes, kHeaderBytes);
    body(at, count, bytes + kHeaderBytes, scale);
    bytes += kHeaderBytes + static_cast<size_t>(count);
  }
}

}  // namespace

void Quantize8Codec::encode(const float* in, int64_t n, void* out) const {
  auto* bytes = static_cast<unsigned char*>(out);
  for (int64_t at = 0; at < n; at += kScaleBlock) {
    const int64_t count = std::min(kScaleBlock, n - at);
    encode_block(in + at, count, bytes);
    bytes += kHeaderBytes + static_cast<size_t>(count);
  }
}

void Quantize8Codec::decode(const void* in, int64_t n, float* out) const {
  for_each_encoded_block(in, n,
                         [out](int64_t at, int64_t count, const unsigned char* q, float scale) {
                           codec_kernels::best::quantize8_decode(q, count, scale, out + at);
                         });
}

void Quantize8Codec::decode_add(const void* in, int64_t n, float* out) const {
  for_each_encoded_block(in, n,
                         [out](int64_t at, int64_t count, const unsigned char* q, float scale) {
                           codec_kernels::best::quantize8_decode_add(q, count, scale, out + at);
                         });
}

double Quantize8Codec::error_bound(double block_max_abs, double value_abs) const {
  if (block_max_abs < kMinMaxAbs) return value_abs;  // sent as zero
  // Exactly: |q·s − x| ≤ s/2 with s = M/127. Float rounding adds a few ulps: of s (stored as a
  // float), of x·(127/M) (two roundings, scaled back by s) and of the decoded product q·s.
  const double s = block_max_abs / kLevels;
  return s * (0.5 + 0x1p-21) + value_abs * 0x1p-21;
}

}  // namespace dtrain
