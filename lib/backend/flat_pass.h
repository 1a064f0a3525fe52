// A fused element-wise pass over flat f32 buffers of one size, written once as a functor and run
// by every backend: the optimizers' updates (lib/optim) are such passes. A pass type F is
//
//   struct F {
//     static std::string name();    // unique: the CUDA plugin's table key, and messages
//     static constexpr int kBuffers = 3;
//     <its coefficients as members>
//     DTRAIN_HOST_DEVICE void operator()(int64_t i, float* w, const float* g, float* v) const;
//   };
//
// element i of each buffer in, element i out, nothing else shared between elements. A sum pass
// also has `static constexpr int kSumWith` and returns a float z_i from operator(): the pass
// then returns Σ y_i·z_i in double, y the buffer kSumWith after the pass, in an order fixed by
// the size alone (the CPU's lane order, the GPU's block tree: Backend::dot's), so that equal
// inputs give equal bits on every rank.
//
// The loops are templates, instantiated where F is known: the CPU loop wherever run_pass<F> is
// called (backend/run_pass.h: host code compiled with OpenMP), the CUDA kernel in a .cu of the
// plugin that lists F (backend/cuda/device_pass.cuh). Backend::run_pass only picks which of the
// two runs.
#pragma once
#include <cstdint>  // int64_t
#include <string>
#include <vector>

#include "backend/pass_buffers.h"  // PassBuffers, DTRAIN_HOST_DEVICE, is_sum_pass
#include "core/tensor.h"           // Tensor

namespace dtrain {

// How the backends run one pass type: its name, and its CPU loops (host code compiled with F).
struct PassKernels {
  std::string name;
  // F (its bytes at `functor`) over [0, buffers.n) on up to `threads` threads.
  void (*cpu)(const void* functor, const PassBuffers& buffers, int threads) = nullptr;
  // A sum pass: the same, one thread, returning Σ y·z (null for other passes).
  double (*cpu_sum)(const void* functor, const PassBuffers& buffers) = nullptr;
};

// The buffers of pass `pass` of `count` buffers: each f32 on `device` and of the first one's
// size; an undefined tensor is a null pointer (a buffer the functor does not read).
PassBuffers pass_buffers(const std::string& pass, int count, Device device,
                         const std::vector<Tensor>& tensors);

}  // namespace dtrain
