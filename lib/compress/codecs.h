// The three codecs behind make_codec, with their exact wire formats. Each is stateless and
// thread-safe; the arithmetic lives in codec_kernels.h.
#pragma once
#include "compress/codec.h"  // Codec

namespace dtrain {

// The raw float32 bytes. decode_add is a plain element-wise add.
class NoneCodec final : public Codec {
 public:
  std::string name() const override { return "none"; }
  size_t encoded_bytes(int64_t n) const override;
  void encode(const float* in, int64_t n, void* out) const override;
  void decode(const void* in, int64_t n, float* out) const override;
  void decode_add(const void* in, int64_t n, float* out) const override;
  double error_bound(double block_max_abs, double value_abs) const override { return 0.0; }
  double compression_ratio() const override { return 1.0; }
};

// Pipe-SGD's 16-bit truncation: n uint16 values (native byte order), each the upper half of the
// float's bits — sign, 8 exponent bits, 7 mantissa bits, i.e. the bfloat16 bit pattern. The low
// 16 bits are dropped (truncated toward zero, not rounded: "drop the less significant mantissa
// bits"), and decoding puts zeros back. Relative error < 2^-7 for normal floats, absolute
// error < 2^-133 for subnormals. ±Inf stays ±Inf; every NaN stays a NaN (its quiet bit is set,
// so that a NaN whose payload lies only in the dropped bits does not turn into Inf).
class Truncate16Codec final : public Codec {
 public:
  std::string name() const override { return "truncate16"; }
  size_t encoded_bytes(int64_t n) const override;
  void encode(const float* in, int64_t n, void* out) const override;
  void decode(const void* in, int64_t n, float* out) const override;
  void decode_add(const void* in, int64_t n, float* out) const override;
  double error_bound(double block_max_abs, double value_abs) const override;
  double compression_ratio() const override { return 2.0; }
};

// Pipe-SGD's 8-bit scalar quantisation with the range set by the largest magnitude M of each
// scale block of kScaleBlock consecutive values (the last one shorter). The paper takes the
// range from "the maximal element of a gradient vector"; one range for a whole ring block —
// half of a 2-rank model's gradient, across all its layers — sent every value of a transformer
// below M/254 to zero (AdamW then trains on the largest layers' gradients alone: the baby GPT's
// validation perplexity +7.6 % over sync uncompressed; +0.04 % with these blocks). Each scale
// block is a float32 scale s = M / 127 (4 bytes, native byte order, unaligned; one ulp less for
// M = FLT_MAX, where 127·s would overflow) followed by its int8 values
// q_i = round_half_even(x_i · (127 / M)) ∈ [−127, 127]; decode gives q_i · s. Multiplying by
// 127 / M instead of dividing by s keeps the quantise pass at memory speed; both are within
// float rounding of each other, which error_bound covers: |error| ≤ s/2 plus float rounding.
// Special blocks:
//   M = 0, or M < 127 · FLT_MIN (≈1.5e-36, where s would be subnormal): s = 0 and all q = 0,
//     so the block decodes to zeros (error ≤ M).
//   any NaN or ±Inf in the block: s = NaN and all q = 0, so every element decodes to NaN. A
//     diverged rank thus poisons the summed gradient, the weights and the loss, and the trainer's
//     NaN-loss check stops the run instead of training on silently clipped values.
class Quantize8Codec final : public Codec {
 public:
  // Values per scale: a scale block's encoding is its float scale, then its int8 values.
  static constexpr int64_t kScaleBlock = 1024;
  std::string name() const override { return "quantize8"; }
  size_t encoded_bytes(int64_t n) const override;
  void encode(const float* in, int64_t n, void* out) const override;
  void decode(const void* in, int64_t n, float* out) const override;
  void decode_add(const void* in, int64_t n, float* out) const override;
  double error_bound(double block_max_abs, double value_abs) const override;
  double compression_ratio() const override { return 4.0; }  // plus 4 bytes per 1024 values
};

}  // namespace dtrain
