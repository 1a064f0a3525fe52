// Truncate16Codec: the bfloat16 bit pattern by truncation (Pipe-SGD §3.2).
#include "compress/codec_kernels.h"
#include "compress/codecs.h"

namespace dtrain {

size_t Truncate16Codec::encoded_bytes(int64_t n) const {
  return static_cast<size_t>(n) * sizeof(uint16_t);
}

void Truncate16Codec::encode(const float* in, int64_t n, void* out) const {
  codec_kernels::best::truncate16_encode(in, n, out);
}

void Truncate16Codec::decode(const void* in, int64_t n, float* out) const {
  codec_kernels::best::truncate16_decode(in, n, out);
}

void Truncate16Codec::decode_add(const void* in, int64_t n, float* out) const {
  codec_kernels::best::truncate16_decode_add(in, n, out);
}

double Truncate16Codec::error_bound(double block_max_abs, double value_abs) const {
  // A normal float 1.m·2^e loses mantissa bits worth < 2^(e−7) ≤ 2^−7·|x|; a subnormal loses
  // fewer than 16 bits of 2^−149 each, < 2^−133 in all.
  return value_abs * 0x1p-7 + 0x1p-133;
}

}  // namespace dtrain
