// The weight gradient of a stride-1 convolution on activations in blocks of 16 channels (nChw16c),
// for the shapes where oneDNN 2.6's kernel runs far below the FMA peak in a training step: rows of
// 32 or more outputs (ResNet-20's first stage: 16→16 channels at 32×32, where this kernel reaches
// 94 % of the FMA peak with the data in cache; the measurements:
// bench/results/2026-11-26-cpu-engine.md). Per image and 16×16 channel pair, per few output rows,
// the 16 input-channel accumulators of one kernel tap sweep the rows: one 16-output-channel
// gradient vector times 16 broadcast inputs per output pixel, while the rows stay in L1 for the
// other taps; the images' sums add up in memory of the op, per thread. The result is plain OIHW, so
// no reorder follows. CpuConv takes it where blocked_weight_grad_suits says (measured; below 32
// columns oneDNN is faster).
#pragma once
#include <cstdint>  // int64_t
#include <vector>

#include "backend/cpu/simd.h"  // Vec
#include "backend/ops.h"       // ConvSpec

namespace dtrain::cpu {

bool blocked_weight_grad_suits(const ConvSpec& s);

class BlockedWeightGrad {
 public:
  BlockedWeightGrad() = default;
  // Sums for `threads` threads (images are spread over threads).
  BlockedWeightGrad(const ConvSpec& s, int threads);

  // Overwrites dw (OIHW) and db unless null, from x and dy in blocks of 16 channels.
  void run(const float* x, const float* dy, float* dw, float* db);

 private:
  // Adds image n's gradient into `sums` ([out blocks][in blocks][taps][16 inputs] vectors of
  // 16 outputs).
  void add_image(const float* x, const float* dy, int64_t n, simd::Vec* sums) const;

  ConvSpec s_;
  int threads_ = 1;
  int64_t per_thread_ = 0;       // vectors of sums per thread
  std::vector<simd::Vec> sums_;  // [threads][per_thread_]
};

}  // namespace dtrain::cpu
