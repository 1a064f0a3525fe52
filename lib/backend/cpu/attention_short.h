// Causal attention of one (sequence, head) pair of a short sequence on the CPU, whole-head
// kernels (attention_short.cpp) that cpu_attention.cpp calls when the sequence fits them.
#pragma once
#include <cstdint>

#include "backend/cpu/attention_tiles.h"

namespace dtrain::cpu::attention {

// Sequences up to this length take the whole-head kernels: a head's keys and values, and in
// the backward its weights and their gradients (T × T each), stay in L1/L2 at once.
constexpr int64_t kShortSeq = 64;
// ... and heads up to this size (whose rows are copied at this fixed stride).
constexpr int64_t kShortDim = 64;

// One head's place in the [N, T, 3C] and [N, T, C] tensors; Dp and Tp are D and T rounded up
// to whole vectors.
struct HeadShape {
  int64_t T, H, D, C, Dp, Tp;
};

// Floats of workspace one thread's calls of the two functions below need.
int64_t short_workspace_floats(const HeadShape& g);

// The activations (qkv, y, dy, dqkv) are E: float, or bf16 (uint16_t, cpu/bf16.h), which the
// kernels widen into their f32 copies as they read it and round once as they store y or dqkv;
// the same workspace serves both. Instantiated for those two types only.

// y and lse of head h of sequence n (ops.h's AttentionOp::forward for one pair).
template <class E>
void short_forward_head(const HeadShape& g, int64_t n, int64_t h, const E* qkv, E* y, float* lse,
                        float* ws, const DropoutDraw& drop);

// dqkv of head h of sequence n, overwritten (AttentionOp::backward for one pair).
template <class E>
void short_backward_head(const HeadShape& g, int64_t n, int64_t h, const E* qkv, const E* y,
                         const E* dy, const float* lse, float* ws, const DropoutDraw& drop,
                         E* dqkv);

}  // namespace dtrain::cpu::attention
