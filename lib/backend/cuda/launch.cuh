// Launch geometry shared by the element-wise kernels: grid-stride loops over int64 sizes with a
// grid capped at a few waves of the GPU, so that one launch covers any buffer.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>  // std::min
#include <cstdint>

namespace dtrain::cuda {

constexpr int kThreads = 256;

inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), 65535 * 8));
}

#define DTRAIN_GRID_STRIDE(i, n)                                                         \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace dtrain::cuda
