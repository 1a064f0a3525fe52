// Test blocks for the codec tests: reproducible random data of the shapes gradients take, and
// byte buffers with guard bytes that catch out-of-bounds writes.
#pragma once
#include <bit>      // std::bit_cast
#include <cmath>    // std::ldexp
#include <cstdint>  // int64_t, uint32_t
#include <cstring>  // std::memcpy
#include <string>
#include <vector>

#include "core/rng.h"  // random_bits, random_uniform, random_normal

namespace dtrain::test {

enum class BlockKind {
  gradient,     // N(0, 1e-3²): what a codec sees most
  mixed,        // magnitudes 2^-30 … 2^10, random signs
  negative,     // all < 0, so the largest magnitude is a negative value
  one_huge,     // gradient-like plus one 1e30 (a quantize8 scale set by an outlier)
  zeros,        // all 0
  finite_bits,  // any finite float bit pattern: subnormals up to ±FLT_MAX
};

inline const char* kind_name(BlockKind kind) {
  switch (kind) {
    case BlockKind::gradient:
      return "gradient";
    case BlockKind::mixed:
      return "mixed";
    case BlockKind::negative:
      return "negative";
    case BlockKind::one_huge:
      return "one_huge";
    case BlockKind::zeros:
      return "zeros";
    case BlockKind::finite_bits:
      return "finite_bits";
  }
  return "?";
}

inline std::vector<float> make_block(BlockKind kind, int64_t n, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = random_bits(seed, 0, i);
    const float sign = (bits & 1) ? -1.0f : 1.0f;
    float& v = x[static_cast<size_t>(i)];
    switch (kind) {
      case BlockKind::gradient:
        v = 1e-3f * random_normal(seed, 1, i);
        break;
      case BlockKind::mixed:
        v = sign * std::ldexp(1.0f + random_uniform(seed, 2, i), static_cast<int>(bits % 41) - 30);
        break;
      case BlockKind::negative:
        v = -1e-2f * (random_uniform(seed, 3, i) + 1e-3f);
        break;
      case BlockKind::one_huge:
        v = 1e-3f * random_normal(seed, 1, i);
        break;
      case BlockKind::zeros:
        v = 0.0f;
        break;
      case BlockKind::finite_bits: {
        auto b = static_cast<uint32_t>(bits >> 32);
        if ((b & 0x7f800000u) == 0x7f800000u) b &= 0xbfffffffu;  // Inf/NaN exponent → finite
        v = std::bit_cast<float>(b);
        break;
      }
    }
  }
  if (kind == BlockKind::one_huge) x[static_cast<size_t>(random_bits(seed, 4, 0) % n)] = 1e30f;
  return x;
}

// A byte buffer whose usable part starts at an odd address and is surrounded by guard bytes.
class GuardedBytes {
 public:
  explicit GuardedBytes(size_t size) : size_(size), bytes_(size + 2 * kGuard + 1, kPattern) {}
  unsigned char* data() { return bytes_.data() + kGuard + 1; }
  bool guards_intact() const {
    for (size_t k = 0; k < bytes_.size(); ++k) {
      const bool inside = k >= kGuard + 1 && k < kGuard + 1 + size_;
      if (!inside && bytes_[k] != kPattern) return false;
    }
    return true;
  }

 private:
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kPattern = 0xA5;
  size_t size_;
  std::vector<unsigned char> bytes_;
};

// n floats starting one float past a 64-byte boundary, guarded by sentinels on both sides.
class GuardedFloats {
 public:
  explicit GuardedFloats(int64_t n, float fill = 0.0f)
      : n_(n), floats_(static_cast<size_t>(n) + 2 * kGuard + 16, kSentinel) {
    auto address = reinterpret_cast<uintptr_t>(floats_.data() + kGuard);
    start_ = kGuard + ((64 - address % 64) % 64) / sizeof(float) + 1;
    for (int64_t i = 0; i < n; ++i) data()[i] = fill;
  }
  float* data() { return floats_.data() + start_; }
  bool guards_intact() const {
    for (size_t k = 0; k < floats_.size(); ++k) {
      const bool inside = k >= start_ && k < start_ + static_cast<size_t>(n_);
      if (!inside && std::bit_cast<uint32_t>(floats_[k]) != std::bit_cast<uint32_t>(kSentinel))
        return false;
    }
    return true;
  }

 private:
  static constexpr size_t kGuard = 32;
  static constexpr float kSentinel = 12345.678f;
  int64_t n_;
  std::vector<float> floats_;
  size_t start_ = 0;
};

// Bit-exact float comparison (NaN == NaN when the bits agree).
inline bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

}  // namespace dtrain::test
