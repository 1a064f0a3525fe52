// bf16 activations in the kernels: stored as raw 16-bit patterns on the host side of the
// launchers (kernels.h takes uint16_t so that plain C++ needs no CUDA header), read here as
// __nv_bfloat16. Loads widen exactly to f32; stores round to nearest even once, as the CPU's
// f32_to_bf16 does, so a kernel computes in f32 whatever type its activations have.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace dtrain::cuda {

__device__ __forceinline__ float load_f32(const float* p, int64_t i) {
  return p[i];
}
__device__ __forceinline__ float load_f32(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store_f32(float* p, int64_t i, float v) {
  p[i] = v;
}
__device__ __forceinline__ void store_f32(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

inline const __nv_bfloat16* as_bf16(const uint16_t* p) {
  return reinterpret_cast<const __nv_bfloat16*>(p);
}
inline __nv_bfloat16* as_bf16(uint16_t* p) {
  return reinterpret_cast<__nv_bfloat16*>(p);
}

}  // namespace dtrain::cuda
