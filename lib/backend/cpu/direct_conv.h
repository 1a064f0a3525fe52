// Direct stride-1 convolution on plain NCHW tensors, vectorised along the output rows, for the
// small channel counts where oneDNN's kernels do poorly: they vectorise over blocks of 16
// channels, so LeNet's 6-channel tensors run 10/16 of every vector on padding and every call
// pays reorders between NCHW and the blocked layouts (a 64×6×28×28 reorder costs as much as the
// convolution). Here every lane holds a real output column, nothing is reordered, and a fused
// ReLU costs nothing: the forward clamps what it stores, the backward passes mask the
// gradient while copying it into their padded rows. CpuConv picks this per pass (see
// direct_conv_suits).
#pragma once
#include <cstdint>  // int64_t

#include "backend/ops.h"  // ConvSpec
#include "core/tensor.h"  // Tensor: scratch

namespace dtrain::cpu {

// Which passes of a convolution the direct kernels take (measured, see direct_conv_suits):
// those whose oneDNN kernels would vectorise over fewer than 16 real channels (forward and
// weight gradient: output channels; data gradient: input channels) when rows have at least 8
// columns, and forward and data gradient on rows of 32 or more with few channels.
struct DirectConvPasses {
  bool forward = false, backward_data = false, backward_weights = false;
};
// Shapes the direct kernels handle at all: stride 1, padding < kernel, kernel width ≤ 7.
bool direct_conv_supports(const ConvSpec& s);
DirectConvPasses direct_conv_suits(const ConvSpec& s);

class DirectConv {
 public:
  DirectConv() = default;
  // Scratch for `threads` threads (samples are spread over threads).
  DirectConv(const ConvSpec& s, int threads);

  // y = b + conv(x, w), clamped at 0 when `relu`. b may be null.
  void forward(const float* x, const float* w, const float* b, float* y, bool relu);
  // dx from dy; with `mask` (the ReLU output y) dy counts only where mask > 0.
  void backward_data(const float* mask, const float* dy, const float* w, float* dx);
  // Overwrites dw (and db unless null).
  void backward_weights(const float* x, const float* mask, const float* dy, float* dw, float* db);

 private:
  ConvSpec s_;
  int threads_ = 1;
  int64_t oh_ = 0, ow_ = 0;
  int64_t fwd_wp_ = 0, bd_wp_ = 0, bw_wp_ = 0, bw_gw_ = 0, bw_grows_ = 0;  // padded row widths
  Tensor packed_;  // weights rearranged for the forward / data-gradient kernels
  Tensor fwd_x_;   // per thread: [C][H][fwd_wp_] input rows
  Tensor bd_g_;    // per thread: [O][OH][bd_wp_] gradient rows
  Tensor bw_x_;    // per thread: [C][H][bw_wp_] input rows
  Tensor bw_g_;    // per thread: [O][bw_grows_][bw_gw_] gradient rows, Kh−1 zero rows each side
  Tensor bw_acc_;  // per thread: vector accumulators of dw and db
};

}  // namespace dtrain::cpu
