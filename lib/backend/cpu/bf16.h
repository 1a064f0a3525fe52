// bfloat16 values as the CPU kernels store them: the upper 16 bits of an f32 (same exponent,
// 8 mantissa bits). Conversions round to nearest, ties to even, as oneDNN's reorders and
// PyTorch's casts do, so a kernel that rounds with these gives the bits a reorder would.
// Whole tensors convert through Backend::reorder; these are for kernels that read bf16, compute
// in f32 and store bf16 in the same pass.
#pragma once
#include <bit>      // bit_cast
#include <cstdint>  // uint16_t, uint32_t

namespace dtrain::cpu {

using bf16_t = uint16_t;

inline float bf16_to_f32(bf16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline bf16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((u >> 16) | 0x40u);  // quiet NaN
  return static_cast<bf16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// f rounded to the nearest bf16, as an f32 (tests build bf16-representable inputs with it).
inline float round_to_bf16(float f) {
  return bf16_to_f32(f32_to_bf16(f));
}

}  // namespace dtrain::cpu
