// The grid-stride kernels of the fused element-wise passes (backend/flat_pass.h) and their
// registration: a .cu file of the plugin that includes a pass's functor lists it with
//   DTRAIN_DEVICE_PASSES(sgd::StepPass<...>, ...);
// and the CUDA backend finds the kernel by the pass's name. The functor runs on the device as it
// runs on the CPU; the plugin's device code is compiled without FMA contraction
// (lib/backend/CMakeLists.txt), so that it rounds as the CPU's loop where the CPU does not
// contract either.
#pragma once
#include <utility>  // index_sequence

#include "backend/cuda/cuda_check.h"     // DTRAIN_CUDA_CHECK_LAUNCH
#include "backend/cuda/device_passes.h"  // DevicePass, register_device_pass
#include "backend/cuda/launch.cuh"       // grid_for, kThreads, DTRAIN_GRID_STRIDE

namespace dtrain::cuda {
namespace pass_kernels {

template <class F, size_t... I>
__global__ void run_kernel(const F f, const PassBuffers b) {
  DTRAIN_GRID_STRIDE(i, b.n) f(i, b.data[I]...);
}
template <class F, size_t... I>
__global__ void produce_kernel(const F f, const PassBuffers b, float* z) {
  DTRAIN_GRID_STRIDE(i, b.n) z[i] = f(i, b.data[I]...);
}

template <class F, size_t... I>
void run(const void* functor, const PassBuffers& b, cudaStream_t stream,
         std::index_sequence<I...>) {
  if (b.n <= 0) return;
  run_kernel<F, I...><<<grid_for(b.n), kThreads, 0, stream>>>(*static_cast<const F*>(functor), b);
  DTRAIN_CUDA_CHECK_LAUNCH();
}
template <class F, size_t... I>
void produce(const void* functor, const PassBuffers& b, float* z, cudaStream_t stream,
             std::index_sequence<I...>) {
  if (b.n <= 0) return;
  produce_kernel<F, I...>
      <<<grid_for(b.n), kThreads, 0, stream>>>(*static_cast<const F*>(functor), b, z);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

template <class F>
bool register_one() {
  using Indices = std::make_index_sequence<F::kBuffers>;
  DevicePass pass;
  if constexpr (is_sum_pass<F>::value) {
    pass.produce = [](const void* f, const PassBuffers& b, float* z, cudaStream_t s) {
      produce<F>(f, b, z, s, Indices{});
    };
    pass.sum_with = F::kSumWith;
  } else {
    pass.run = [](const void* f, const PassBuffers& b, cudaStream_t s) {
      run<F>(f, b, s, Indices{});
    };
  }
  return register_device_pass(F::name(), pass);
}

template <class... F>
bool register_all() {
  return (register_one<F>() && ...);
}

}  // namespace pass_kernels
}  // namespace dtrain::cuda

#define DTRAIN_DEVICE_PASSES_JOIN2(a, b) a##b
#define DTRAIN_DEVICE_PASSES_JOIN(a, b) DTRAIN_DEVICE_PASSES_JOIN2(a, b)
// Registers the kernels of the listed pass types when the plugin loads.
#define DTRAIN_DEVICE_PASSES(...)                                                                 \
  [[maybe_unused]] static const bool DTRAIN_DEVICE_PASSES_JOIN(dtrain_device_passes_, __LINE__) = \
      ::dtrain::cuda::pass_kernels::register_all<__VA_ARGS__>()
