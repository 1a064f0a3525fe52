// Peak single-core fp32 throughput: a chain of fused multiply-adds on kAccumulators independent
// vector accumulators (enough to cover the FMA latency times the FMA units of any x86 core),
// nothing else in the loop but its counter. Measures AVX2 (8 lanes) and, where the CPU has it,
// AVX-512 (16 lanes), in GFLOP/s (an FMA counts 2 FLOPs), best of short timed chunks (the
// machines are shared and noisy), and prints the best ISA's figure as the core's peak.
// bench/engine_vs_pytorch.py prints each model's training GFLOP/s as a share of it.
//   dtrain_cpu_peak --seconds 1
#include <CLI/CLI.hpp>  // command line
#include <algorithm>    // std::max
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // _mm256_fmadd_ps, _mm512_fmadd_ps, stores
#define DTRAIN_CPU_PEAK_X86 1
#endif

namespace {

#ifdef DTRAIN_CPU_PEAK_X86
using Clock = std::chrono::steady_clock;

// 2 FMA units × 4 cycles of latency need 8 chains in flight; 12 leave margin and, with the two
// operands, still fit in AVX2's 16 vector registers (more would spill to the stack).
constexpr int kAccumulators = 12;
constexpr int64_t kChunk = 1 << 22;  // loop trips per timed chunk: ~10-50 ms
volatile float g_sink;               // the kernels' results go here, so that they run

// acc = acc·a + b converges to b / (1 − a): no overflow, no denormals, never optimised away.
__attribute__((target("avx2,fma"))) float fma_avx2(int64_t trips, float a_value) {
  __m256 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
  const __m256 a = _mm256_set1_ps(a_value), b = _mm256_set1_ps(1e-3f);
  for (int64_t t = 0; t < trips; ++t) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  }
  __m256 sum = acc[0];
  for (int k = 1; k < kAccumulators; ++k) sum = _mm256_add_ps(sum, acc[k]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  return lanes[0] + lanes[7];
}

__attribute__((target("avx512f"))) float fma_avx512(int64_t trips, float a_value) {
  __m512 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512 a = _mm512_set1_ps(a_value), b = _mm512_set1_ps(1e-3f);
  for (int64_t t = 0; t < trips; ++t) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  }
  __m512 sum = acc[0];
  for (int k = 1; k < kAccumulators; ++k) sum = _mm512_add_ps(sum, acc[k]);
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  return lanes[0] + lanes[15];
}

// Best GFLOP/s of `kernel` over timed chunks for `seconds` (after one untimed chunk that brings
// the core to its vector clock).
template <typename Kernel>
double best_gflops(Kernel kernel, int lanes, double seconds, float a_value) {
  g_sink = kernel(kChunk, a_value);
  const double flops = 2.0 * lanes * kAccumulators * static_cast<double>(kChunk);
  double best = 0, total = 0;
  for (int rep = 0; rep < 3 || total < seconds; ++rep) {
    const auto start = Clock::now();
    g_sink = kernel(kChunk, a_value);
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, flops / t * 1e-9);
    total += t;
  }
  return best;
}

#endif  // DTRAIN_CPU_PEAK_X86

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"peak single-core fp32 FMA throughput"};
  double seconds = 1.0;
  app.add_option("--seconds", seconds, "measuring time per ISA");
  CLI11_PARSE(app, argc, argv);
#ifndef DTRAIN_CPU_PEAK_X86
  std::fprintf(stderr, "cpu_peak: only x86 (AVX2, AVX-512) is measured\n");
  return 1;
#else
  // Read at run time so that the compiler cannot fold the chain.
  const float a_value = 0.999f + 1e-4f * static_cast<float>(argc > 1000);

  __builtin_cpu_init();
  std::string best_isa = "none";
  double peak = 0;
  auto report = [&](const char* isa, int lanes, double gflops) {
    std::printf("cpu_peak isa=%s lanes=%d accumulators=%d gflops=%.1f\n", isa, lanes, kAccumulators,
                gflops);
    if (gflops > peak) peak = gflops, best_isa = isa;
  };
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    report("avx2", 8, best_gflops(fma_avx2, 8, seconds, a_value));
  if (__builtin_cpu_supports("avx512f"))
    report("avx512", 16, best_gflops(fma_avx512, 16, seconds, a_value));
  if (peak == 0) {
    std::fprintf(stderr, "cpu_peak: this CPU has neither AVX2+FMA nor AVX-512\n");
    return 1;
  }
  std::printf("cpu_peak threads=1 isa=%s peak_gflops=%.1f\n", best_isa.c_str(), peak);
  return 0;
#endif
}
