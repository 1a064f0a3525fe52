// The CUDA kernels of the fused element-wise passes (backend/flat_pass.h), by pass name: filled
// when the plugin loads, by the static registrations of the .cu files that list their passes
// (device_pass.cuh), and read by the CUDA backend's run_pass.
#pragma once
#include <cuda_runtime_api.h>  // cudaStream_t

#include <string>

#include "backend/pass_buffers.h"  // PassBuffers

namespace dtrain::cuda {

struct DevicePass {
  // A plain pass: the functor (its bytes at `functor`) over the buffers, enqueued on `stream`.
  void (*run)(const void* functor, const PassBuffers& buffers, cudaStream_t stream) = nullptr;
  // A sum pass: the same, with each element's z written to `z` (n floats) for the backend to sum
  // with buffer `sum_with`.
  void (*produce)(const void* functor, const PassBuffers& buffers, float* z,
                  cudaStream_t stream) = nullptr;
  int sum_with = -1;
};

// Adds `pass` under `name`; a name registered twice is a programming error (std::logic_error).
bool register_device_pass(const std::string& name, const DevicePass& pass);
// Null when no .cu of the plugin lists the pass.
const DevicePass* find_device_pass(const std::string& name);

}  // namespace dtrain::cuda
