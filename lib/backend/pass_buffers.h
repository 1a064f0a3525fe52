// What a fused element-wise pass (backend/flat_pass.h) runs over, in a header of its own that the
// CUDA plugin's device code includes too (nvcc compiles it as C++17).
#pragma once
#include <array>
#include <cstdint>  // int64_t
#include <type_traits>

#ifdef __CUDACC__
#define DTRAIN_HOST_DEVICE __host__ __device__
#else
#define DTRAIN_HOST_DEVICE
#endif

namespace dtrain {

constexpr int kMaxPassBuffers = 6;

// The buffers of one pass: element pointers (null where a pass reads no such buffer) and their
// common size.
struct PassBuffers {
  std::array<float*, kMaxPassBuffers> data{};
  int64_t n = 0;
};

// Whether pass type F is a sum pass (it names the buffer kSumWith that its z multiplies).
template <class F, class = void>
struct is_sum_pass : std::false_type {};
template <class F>
struct is_sum_pass<F, std::void_t<decltype(F::kSumWith)>> : std::true_type {};

}  // namespace dtrain
