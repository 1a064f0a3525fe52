// Counter-based random numbers: value i of stream s under seed k is a pure function of (k, s, i),
// so initialisation and dropout masks are identical whatever the thread count or the device
// (the CUDA kernels use the same hash), and any element can be generated independently.
#pragma once
#include <cmath>    // log, sqrt, cos
#include <cstdint>  // uint64_t

namespace dtrain {

// SplitMix64 finaliser: a fast, well-mixed 64-bit hash.
constexpr uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t random_bits(uint64_t seed, uint64_t stream, uint64_t index) {
  return mix64(mix64(seed ^ mix64(stream)) + index);
}

// Uniform in [0, 1) with 24 bits of precision (exactly representable as float).
constexpr float random_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<float>(random_bits(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal by Box–Muller on two independent uniforms derived from `index`.
inline float random_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t bits = random_bits(seed, stream, index);
  double u1 = (static_cast<double>(bits >> 40) + 1.0) / 16777217.0;  // (0, 1]: log is finite
  double u2 = static_cast<double>(bits & 0xffffffULL) / 16777216.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// Names the streams so that two uses of one seed never draw the same numbers.
enum class RngStream : uint64_t {
  init = 1,
  dropout = 2,
  shuffle = 3,
  synthetic_data = 4,
  augment = 5
};

constexpr uint64_t stream_id(RngStream s, uint64_t sub = 0) {
  return (static_cast<uint64_t>(s) << 48) ^ sub;
}

}  // namespace dtrain
