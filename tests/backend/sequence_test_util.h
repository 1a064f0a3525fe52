// Helpers of the sequence-op tests: random inputs, a CPU backend of a given thread count,
// tensors compared bit for bit.
#pragma once
#include <cstring>  // memcmp
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/rng.h"

namespace dtrain::test {

// Uniform in [−scale/2, scale/2).
inline Tensor random_tensor(const Shape& s, uint64_t stream, float scale = 1.0f) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = (random_uniform(9, stream, i) - 0.5f) * scale;
  return t;
}

inline std::unique_ptr<Backend> cpu_backend(int threads) {
  auto be = make_backend({DeviceChoice::cpu, threads, 0});
  be->set_num_threads(threads);
  return be;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

inline std::vector<double> to_double(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.numel()};
}

}  // namespace dtrain::test
