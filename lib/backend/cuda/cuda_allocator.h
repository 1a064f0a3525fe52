// Allocators of the CUDA backend. Model memory (parameters, gradients, activations, workspaces)
// is allocated once when the graph is built, so plain cudaMalloc is enough: there is no
// per-iteration allocation to cache. Pinned host memory makes host↔device copies asynchronous
// (the loader's batches, the host staging of gradients).
#pragma once
#include <cstdint>

#include "core/tensor.h"  // Allocator

namespace dtrain::cuda {

// Device memory of `device` (one allocator per device, alive until exit).
Allocator& device_allocator(int device);
// The most device memory device_allocator(device) has held at once (run.yaml's peak), and the
// device's capacity (the start-up memory check's limit on a GPU).
int64_t device_peak_bytes(int device);
int64_t device_total_bytes(int device);
// Page-locked host memory; tensors from it are host tensors (Device::cpu).
Allocator& pinned_allocator();

}  // namespace dtrain::cuda
