// The element loops of the codecs, in two builds with identical results:
//   codec_kernels::portable — plain C++ written so that GCC vectorises it for whatever -march the
//     build targets, and correct on any target;
//   codec_kernels::best — what the codecs call: AVX-512 intrinsics when the build has AVX-512F
//     and AVX-512BW, the portable loops otherwise. Tests compare the two bit for bit.
// Pointers to encoded bytes (void*) may have any alignment; float pointers need only the natural
// float alignment. Nothing is read or written beyond the n elements.
#pragma once
#include <cstdint>  // int64_t, uint32_t

namespace dtrain::codec_kernels {

namespace portable {
// out[i] += the i-th float of the raw bytes `in`.
void add_f32(const void* in, int64_t n, float* out);
// n uint16 to `out`: the upper 16 bits of each float, with the quiet bit forced on for NaNs.
void truncate16_encode(const float* in, int64_t n, void* out);
// out[i] (=, +=) the uint16 `in[i]` shifted back into the upper half of a float.
void truncate16_decode(const void* in, int64_t n, float* out);
void truncate16_decode_add(const void* in, int64_t n, float* out);
// max_i (bits(x_i) & 0x7fffffff): the bits of max |x_i| when the block is finite; a result
// ≥ 0x7f800000 means it holds a NaN or an Inf (they order above every finite float). 0 for n = 0.
uint32_t max_abs_bits(const float* in, int64_t n);
// n int8 to `out`: round_half_even(x_i · inv_scale). Requires finite x_i with
// |x_i · inv_scale| < 127.5, i.e. inv_scale = 127 / max |x_i|.
void quantize8_encode(const float* in, int64_t n, float inv_scale, void* out);
// out[i] (=, +=) float(q_i) · scale: a multiply, then (for _add) a separate add.
void quantize8_decode(const void* in, int64_t n, float scale, float* out);
void quantize8_decode_add(const void* in, int64_t n, float scale, float* out);
}  // namespace portable

namespace best {
void add_f32(const void* in, int64_t n, float* out);
void truncate16_encode(const float* in, int64_t n, void* out);
void truncate16_decode(const void* in, int64_t n, float* out);
void truncate16_decode_add(const void* in, int64_t n, float* out);
uint32_t max_abs_bits(const float* in, int64_t n);
void quantize8_encode(const float* in, int64_t n, float inv_scale, void* out);
void quantize8_decode(const void* in, int64_t n, float scale, float* out);
void quantize8_decode_add(const void* in, int64_t n, float scale, float* out);
// The instruction set behind `best`: "avx512" or "portable".
const char* isa();
}  // namespace best

}  // namespace dtrain::codec_kernels
