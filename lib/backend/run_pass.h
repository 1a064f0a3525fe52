// Running a fused element-wise pass (backend/flat_pass.h): the CPU's loops over a pass type F,
// and run_pass<F>, which hands them and the buffers to the backend. Included only where passes
// are run (lib/optim), in code compiled with OpenMP: the loops are instantiated there.
#pragma once
#include <cstdint>
#include <utility>  // index_sequence
#include <vector>

#include "backend/backend.h"    // Backend
#include "backend/flat_pass.h"  // PassKernels, PassBuffers, pass_buffers

namespace dtrain {

namespace pass_detail {

// Buffers of fewer elements stay on one thread: waking a team costs more than the loop.
constexpr int64_t kParallelThreshold = 1 << 16;

// The element loop with the functor and the pointers as by-value locals: no store through a
// buffer can alias them, so the coefficients stay in registers and the loop vectorises. Two
// loops: the single-thread one vectorises as a plain simd loop, not as an OpenMP region run
// alone.
template <class F, class... P>
void loop(const F f, int64_t n, int threads, P... p) {
  if (n <= kParallelThreshold || threads <= 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) f(i, p...);
    return;
  }
#pragma omp parallel for simd num_threads(threads) firstprivate(f)
  for (int64_t i = 0; i < n; ++i) f(i, p...);
}

template <class F, size_t... I>
void cpu_pass(const void* functor, const PassBuffers& b, int threads, std::index_sequence<I...>) {
  loop(*static_cast<const F*>(functor), b.n, threads, b.data[I]...);
}

// Σ y_i·z_i in eight running sums (element i into sum i mod 8), z produced a block at a time by
// a plain simd loop and summed while the block is still in the first-level cache: the pass and
// its sum cost one trip through memory, and z is never written out.
template <class F, class... P>
double sum_loop(const F f, int64_t n, const float* y, P... p) {
  constexpr int kLanes = 8;
  constexpr int64_t kBlock = 2048;  // a multiple of the lanes: the order is fixed by n alone
  alignas(64) float z[kBlock];
  double sum[kLanes] = {};
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t count = n - begin < kBlock ? n - begin : kBlock;
#pragma omp simd
    for (int64_t i = 0; i < count; ++i) z[i] = f(begin + i, p...);
    const float* yb = y + begin;
    int64_t i = 0;
    for (; i + kLanes <= count; i += kLanes)
      for (int l = 0; l < kLanes; ++l)
        sum[l] += static_cast<double>(yb[i + l]) * static_cast<double>(z[i + l]);
    for (int l = 0; i < count; ++i, ++l)  // the last block's tail only
      sum[l] += static_cast<double>(yb[i]) * static_cast<double>(z[i]);
  }
  double total = 0;
  for (double s : sum) total += s;
  return total;
}

template <class F, size_t... I>
double cpu_sum_pass(const void* functor, const PassBuffers& b, std::index_sequence<I...>) {
  return sum_loop(*static_cast<const F*>(functor), b.n, b.data[F::kSumWith], b.data[I]...);
}

}  // namespace pass_detail

// The kernels of pass type F (one object per type).
template <class F>
const PassKernels& pass_kernels() {
  static const PassKernels kernels = [] {
    PassKernels k;
    k.name = F::name();
    using Indices = std::make_index_sequence<F::kBuffers>;
    if constexpr (is_sum_pass<F>::value) {
      k.cpu_sum = [](const void* f, const PassBuffers& b) {
        return pass_detail::cpu_sum_pass<F>(f, b, Indices{});
      };
    } else {
      k.cpu = [](const void* f, const PassBuffers& b, int threads) {
        pass_detail::cpu_pass<F>(f, b, threads, Indices{});
      };
    }
    return k;
  }();
  return kernels;
}

// Runs pass F (flat_pass.h) with `f`'s coefficients over `buffers` (kBuffers of them, of one
// size; an undefined one is a buffer F does not read) on `backend`.
template <class F>
void run_pass(Backend& backend, const F& f, const std::vector<Tensor>& buffers) {
  const PassKernels& pass = pass_kernels<F>();
  backend.run_pass(pass, &f, pass_buffers(pass.name, F::kBuffers, backend.device(), buffers));
}
// Runs sum pass F; `scratch` has the buffers' size (Backend::run_sum_pass).
template <class F>
double run_sum_pass(Backend& backend, const F& f, const std::vector<Tensor>& buffers,
                    const Tensor& scratch) {
  const PassKernels& pass = pass_kernels<F>();
  return backend.run_sum_pass(
      pass, &f, pass_buffers(pass.name, F::kBuffers, backend.device(), buffers), scratch);
}

}  // namespace dtrain
