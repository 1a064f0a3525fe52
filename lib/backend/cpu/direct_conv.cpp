// Direct convolution kernels. GCC vector extensions give 16-float vectors (one AVX-512
// register with -march=native; pairs of AVX2 registers elsewhere). Register tiles are template
// parameters so the accumulators stay in registers:
//   forward: CB output channels × R rows × V vectors of one output row chunk; the input rows
//            are first copied into zero-padded rows, so every tap is an unaligned vector load
//            and rows outside the image are skipped by clipping the kernel rows.
//   data gradient: the same kernel on the gradient (padded by K−1−pad) with the kernel
//            flipped and its channel axes swapped — a stride-1 convolution's adjoint.
//   weight gradient: KHB kernel rows × KW taps of one (output, input) channel pair; each input
//            row is loaded once per tap column and meets KHB gradient rows, which carry Kh−1
//            zero rows above and below so no tap needs a bounds check.
#include "backend/cpu/direct_conv.h"

#include <omp.h>  // omp_get_thread_num

#include <algorithm>  // min, max
#include <cstring>    // memset

#include "backend/cpu/simd.h"  // Vec, load, store, masked row tails
#include "core/error.h"

namespace dtrain::cpu {
namespace {

using namespace simd;

int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

// `rows` rows of `width` floats into rows of `padded` floats: `left` zeros, the row (where
// mask > 0 when a mask is given, else 0), zeros.
void pad_rows(const float* src, const float* mask, int64_t rows, int64_t width, int64_t left,
              int64_t padded, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * width;
    const float* m = mask ? mask + r * width : nullptr;
    float* d = dst + r * padded;
    for (int64_t i = 0; i < padded; i += L) store(d + i, Vec{});
    int64_t i = 0;
    for (; i + L <= width; i += L) {
      Vec v = load(s + i);
      if (m) v = load(m + i) > 0 ? v : 0;
      store(d + left + i, v);
    }
    if (i < width) {
      Vec v = load_part(s + i, width - i);
      if (m) v = load_part(m + i, width - i) > 0 ? v : 0;
      store_part(d + left + i, v, width - i);
    }
  }
}

// ---- forward correlation (also the data gradient) ------------------------------------------

struct CorrelateArgs {
  const float* in;  // [C][H][wp] padded rows of one sample
  int64_t C, H, wp, Kh, Kw, ph;
  const float* w;     // this channel block: [C][Kh][Kw][CB]
  const float* bias;  // this block's CB biases, or null
  float* out;         // plane of the block's first channel
  int64_t plane, OW;
  bool relu;
};

// Output rows [oh, oh + R), columns [j0, j0 + 16V), CB channels.
template <int CB, int V, int R, int KW>
void correlate_tile(const CorrelateArgs& a, int64_t oh, int64_t j0) {
  const int64_t Kw = KW ? KW : a.Kw;
  // Kernel rows inside the image for all R rows (the caller groups rows so that this holds).
  const int64_t kh0 = std::max<int64_t>(0, a.ph - oh);
  const int64_t kh1 = std::min<int64_t>(a.Kh, a.H + a.ph - oh - (R - 1));
  Vec acc[CB][R][V];
  for (int cb = 0; cb < CB; ++cb) {
    const float b = a.bias ? a.bias[cb] : 0.0f;
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) acc[cb][r][v] = Vec{} + b;
  }
  for (int64_t c = 0; c < a.C; ++c) {
    const float* wc = a.w + c * a.Kh * Kw * CB;
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      const float* row = a.in + (c * a.H + oh + kh - a.ph) * a.wp + j0;  // input row of row oh
      const float* wk = wc + kh * Kw * CB;
      for (int64_t kw = 0; kw < Kw; ++kw) {
        Vec x[R][V];
        for (int r = 0; r < R; ++r)
          for (int v = 0; v < V; ++v) x[r][v] = load(row + r * a.wp + kw + v * L);
        for (int cb = 0; cb < CB; ++cb) {
          const float wv = wk[kw * CB + cb];
          for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) acc[cb][r][v] += x[r][v] * wv;
        }
      }
    }
  }
  const int64_t valid = std::min<int64_t>(a.OW - j0, V * L);
  for (int cb = 0; cb < CB; ++cb)
    for (int r = 0; r < R; ++r) {
      float* out = a.out + cb * a.plane + (oh + r) * a.OW + j0;
      for (int v = 0; v < V; ++v) {
        Vec t = acc[cb][r][v];
        if (a.relu) t = t > 0 ? t : 0;
        if ((v + 1) * L <= valid) {
          store(out + v * L, t);
        } else if (v * L < valid) {
          store_part(out + v * L, t, valid - v * L);
        }
      }
    }
}

using TileFn = void (*)(const CorrelateArgs&, int64_t, int64_t);

// Tiles of at most 16 accumulators; narrow rows take two rows at a time to have enough
// independent accumulators to hide the FMA latency.
int max_block(int v) {
  return v == 1 ? 8 : v == 2 ? 6 : v == 3 ? 5 : 4;
}
int rows_per_tile(int v) {
  return v == 1 ? 2 : 1;
}

template <int V, int R, int KW>
TileFn tile_with(int cb) {
  switch (cb) {
    case 1:
      return correlate_tile<1, V, R, KW>;
    case 2:
      return correlate_tile<2, V, R, KW>;
    case 3:
      return correlate_tile<3, V, R, KW>;
    case 4:
      return correlate_tile<4, V, R, KW>;
    case 5:
      return correlate_tile<5, V, R, KW>;
    case 6:
      return correlate_tile<6, V, R, KW>;
    case 7:
      return correlate_tile<7, V, R, KW>;
    default:
      return correlate_tile<8, V, R, KW>;
  }
}
template <int KW>
TileFn tile_for_width(int v, int r, int cb) {
  switch (v) {
    case 1:
      return r == 2 ? tile_with<1, 2, KW>(cb) : tile_with<1, 1, KW>(cb);
    case 2:
      return tile_with<2, 1, KW>(cb);
    case 3:
      return tile_with<3, 1, KW>(cb);
    default:
      return tile_with<4, 1, KW>(cb);
  }
}
// Common kernel widths get fully unrolled taps.
TileFn pick_tile(int64_t kw, int v, int r, int cb) {
  if (kw == 5) return tile_for_width<5>(v, r, cb);
  if (kw == 3) return tile_for_width<3>(v, r, cb);
  return tile_for_width<0>(v, r, cb);
}

int vectors_for(int64_t width) {
  return static_cast<int>(std::min<int64_t>(4, (width + L - 1) / L));
}
int64_t channel_block(int64_t channels, int64_t out_width) {
  return std::min<int64_t>(channels, max_block(vectors_for(out_width)));
}

// out[o] = bias[o] + Σ_c in[c] ⋆ w[o][c] for one sample; `w` packed by pack_weights with
// blocks of channel_block(O, OW).
void correlate(const float* in, int64_t C, int64_t H, int64_t wp, int64_t Kh, int64_t Kw,
               int64_t ph, const float* w, const float* bias, float* out, int64_t O, int64_t OH,
               int64_t OW, bool relu) {
  const int64_t block = channel_block(O, OW);
  // Output rows whose kernel window lies inside the image can go several at a time.
  const int64_t lo = std::min<int64_t>(OH, ph);
  const int64_t hi = std::max<int64_t>(lo, std::min<int64_t>(OH, H + ph - Kh + 1));
  CorrelateArgs a{in, C, H, wp, Kh, Kw, ph, nullptr, nullptr, nullptr, OH * OW, OW, relu};
  for (int64_t o = 0; o < O; o += block) {
    const int cb = static_cast<int>(std::min<int64_t>(block, O - o));
    a.w = w + o * C * Kh * Kw;
    a.bias = bias ? bias + o : nullptr;
    a.out = out + o * OH * OW;
    for (int64_t j0 = 0; j0 < OW; j0 += 4 * L) {
      const int v = vectors_for(OW - j0), r = rows_per_tile(v);
      const TileFn many = pick_tile(Kw, v, r, cb), one = pick_tile(Kw, v, 1, cb);
      int64_t oh = 0;
      for (; oh < lo; ++oh) one(a, oh, j0);
      for (; oh + r <= hi; oh += r) many(a, oh, j0);
      for (; oh < OH; ++oh) one(a, oh, j0);
    }
  }
}

// w [O][C][Kh][Kw] → per block of `block` output channels [C][Kh][Kw][cb]. `adjoint`: the data
// gradient's kernel instead, out = the conv's input channels, spatially flipped.
void pack_weights(const float* w, int64_t O, int64_t C, int64_t Kh, int64_t Kw, int64_t block,
                  bool adjoint, float* packed) {
  const int64_t out_ch = adjoint ? C : O, in_ch = adjoint ? O : C;
  float* d = packed;
  for (int64_t o0 = 0; o0 < out_ch; o0 += block) {
    const int64_t cb = std::min(block, out_ch - o0);
    for (int64_t c = 0; c < in_ch; ++c)
      for (int64_t kh = 0; kh < Kh; ++kh)
        for (int64_t kw = 0; kw < Kw; ++kw)
          for (int64_t b = 0; b < cb; ++b) {
            const int64_t o = o0 + b;
            *d++ = adjoint ? w[((c * C + o) * Kh + (Kh - 1 - kh)) * Kw + (Kw - 1 - kw)]
                           : w[((o * C + c) * Kh + kh) * Kw + kw];
          }
  }
}

// ---- weight gradient ---------------------------------------------------------------------

struct WeightGradArgs {
  const float* x;  // [H][wp] padded rows of one input channel
  const float* g;  // [OH + 2(Kh−1)][gw] gradient rows of one output channel
  int64_t H, wp, gw, ph, Kh;
  Vec* acc;  // [Kh][Kw] accumulators of this (output, input) channel pair
};

template <int KW, int KHB>
void weight_grad_tile(const WeightGradArgs& a, int64_t kh0) {
  Vec acc[KHB][KW] = {};
  const int64_t nv = a.gw / L;
  for (int64_t ih = 0; ih < a.H; ++ih) {
    const float* x = a.x + ih * a.wp;
    // Tap (kh, ·) pairs input row ih with output row ih + ph − kh, stored at + Kh − 1.
    const float* g = a.g + (ih + a.ph - kh0 + a.Kh - 1) * a.gw;
    for (int64_t v = 0; v < nv; ++v) {
      Vec xv[KW];
      for (int kw = 0; kw < KW; ++kw) xv[kw] = load(x + v * L + kw);
      for (int k = 0; k < KHB; ++k) {
        const Vec gv = load(g - k * a.gw + v * L);
        for (int kw = 0; kw < KW; ++kw) acc[k][kw] += gv * xv[kw];
      }
    }
  }
  for (int k = 0; k < KHB; ++k)
    for (int kw = 0; kw < KW; ++kw) a.acc[(kh0 + k) * KW + kw] += acc[k][kw];
}

using WeightGradFn = void (*)(const WeightGradArgs&, int64_t);
constexpr int kMaxKw = 7;
int kernel_rows_per_tile(int64_t kw) {
  return static_cast<int>(std::min<int64_t>(5, 25 / kw));  // ≤ 25 accumulators
}
template <int KW>
WeightGradFn weight_grad_with(int khb) {
  switch (khb) {
    case 1:
      return weight_grad_tile<KW, 1>;
    case 2:
      return weight_grad_tile<KW, 2>;
    case 3:
      return weight_grad_tile<KW, 3>;
    case 4:
      return weight_grad_tile<KW, 4>;
    default:
      return weight_grad_tile<KW, 5>;
  }
}
WeightGradFn pick_weight_grad(int64_t kw, int khb) {
  switch (kw) {
    case 1:
      return weight_grad_with<1>(khb);
    case 2:
      return weight_grad_with<2>(khb);
    case 3:
      return weight_grad_with<3>(khb);
    case 4:
      return weight_grad_with<4>(khb);
    case 5:
      return weight_grad_with<5>(khb);
    case 6:
      return weight_grad_with<6>(khb);
    default:
      return weight_grad_with<7>(khb);
  }
}

}  // namespace

bool direct_conv_supports(const ConvSpec& s) {
  return s.stride_h == 1 && s.stride_w == 1 && s.pad_h < s.kernel_h && s.pad_w < s.kernel_w &&
         s.kernel_w <= kMaxKw && s.out_height() > 0 && s.out_width() > 0;
}

DirectConvPasses direct_conv_suits(const ConvSpec& s) {
  DirectConvPasses p;
  if (!direct_conv_supports(s)) return p;
  const int64_t C = s.in_channels, O = s.out_channels;
  // Rows of 32 and more fill whole vectors; then the direct kernels also beat oneDNN (reorders
  // included) on up to 16×32 (forward) or 32×32 channels (data gradient), e.g. 3→32, 16→16,
  // 32→16 at 32×32: 5–20% faster; not so on narrow rows (8×8: 2.4× slower) or for the weight
  // gradient, which oneDNN does better as soon as there are 16 output channels.
  const bool wide_out = s.out_width() >= 32, wide_in = s.width >= 32;
  p.forward = (O < 16 && s.out_width() >= 8) || (wide_out && C * O <= 16 * 32);
  p.backward_weights = O < 16 && s.out_width() >= 8;
  p.backward_data = (C < 16 && s.width >= 8) || (wide_in && C * O <= 32 * 32);
  return p;
}

DirectConv::DirectConv(const ConvSpec& s, int threads)
    : s_(s), threads_(std::max(threads, 1)), oh_(s.out_height()), ow_(s.out_width()) {
  DTRAIN_CHECK(direct_conv_supports(s)) << "direct convolution: unsupported shape";
  const int64_t C = s.in_channels, O = s.out_channels, H = s.height, W = s.width;
  // Rows wide enough for the last vector's furthest tap.
  fwd_wp_ = round_up(round_up(ow_, L) + s.kernel_w - 1, L);
  bd_wp_ = round_up(round_up(W, L) + s.kernel_w - 1, L);
  bw_gw_ = round_up(ow_, L);
  bw_wp_ = round_up(bw_gw_ + s.kernel_w - 1, L);
  bw_grows_ = oh_ + 2 * (s.kernel_h - 1);
  const int64_t t = threads_;
  packed_ = Tensor::empty({O * C * s.kernel_h * s.kernel_w});
  fwd_x_ = Tensor::empty({t, C * H * fwd_wp_});
  bd_g_ = Tensor::empty({t, O * oh_ * bd_wp_});
  bw_x_ = Tensor::empty({t, C * H * bw_wp_});
  bw_g_ = Tensor::zeros({t, O * bw_grows_ * bw_gw_});  // the zero rows stay zero
  bw_acc_ = Tensor::empty({t, (O * C * s.kernel_h * s.kernel_w + O) * L});
}

void DirectConv::forward(const float* x, const float* w, const float* b, float* y, bool relu) {
  const ConvSpec& s = s_;
  const int64_t C = s.in_channels, O = s.out_channels, H = s.height, W = s.width;
  pack_weights(w, O, C, s.kernel_h, s.kernel_w, channel_block(O, ow_), false,
               packed_.data<float>());
  const float* packed = packed_.data<float>();
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
  for (int64_t n = 0; n < s.batch; ++n) {
    float* in = fwd_x_.data<float>() + omp_get_thread_num() * C * H * fwd_wp_;
    pad_rows(x + n * C * H * W, nullptr, C * H, W, s.pad_w, fwd_wp_, in);
    correlate(in, C, H, fwd_wp_, s.kernel_h, s.kernel_w, s.pad_h, packed, b, y + n * O * oh_ * ow_,
              O, oh_, ow_, relu);
  }
}

void DirectConv::backward_data(const float* mask, const float* dy, const float* w, float* dx) {
  const ConvSpec& s = s_;
  const int64_t C = s.in_channels, O = s.out_channels, H = s.height, W = s.width;
  // The adjoint of a stride-1 convolution with padding p is a convolution of the gradient
  // with padding K−1−p and the flipped kernel, input and output channels swapped.
  const int64_t qh = s.kernel_h - 1 - s.pad_h, qw = s.kernel_w - 1 - s.pad_w;
  pack_weights(w, O, C, s.kernel_h, s.kernel_w, channel_block(C, W), true, packed_.data<float>());
  const float* packed = packed_.data<float>();
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
  for (int64_t n = 0; n < s.batch; ++n) {
    float* g = bd_g_.data<float>() + omp_get_thread_num() * O * oh_ * bd_wp_;
    const int64_t at = n * O * oh_ * ow_;
    pad_rows(dy + at, mask ? mask + at : nullptr, O * oh_, ow_, qw, bd_wp_, g);
    correlate(g, O, oh_, bd_wp_, s.kernel_h, s.kernel_w, qh, packed, nullptr, dx + n * C * H * W, C,
              H, W, false);
  }
}

void DirectConv::backward_weights(const float* x, const float* mask, const float* dy, float* dw,
                                  float* db) {
  const ConvSpec& s = s_;
  const int64_t C = s.in_channels, O = s.out_channels, H = s.height, W = s.width;
  const int64_t Kh = s.kernel_h, Kw = s.kernel_w, taps = Kh * Kw, nw = O * C * taps;
  const int64_t acc_size = (nw + O) * L;
  const int khb = kernel_rows_per_tile(Kw);
  std::memset(bw_acc_.raw(), 0, bw_acc_.bytes());
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
  for (int64_t n = 0; n < s.batch; ++n) {
    const int t = omp_get_thread_num();
    float* xp = bw_x_.data<float>() + t * C * H * bw_wp_;
    float* gp = bw_g_.data<float>() + t * O * bw_grows_ * bw_gw_;
    Vec* acc = reinterpret_cast<Vec*>(bw_acc_.data<float>() + t * acc_size);
    pad_rows(x + n * C * H * W, nullptr, C * H, W, s.pad_w, bw_wp_, xp);
    for (int64_t o = 0; o < O; ++o) {
      const int64_t at = (n * O + o) * oh_ * ow_;
      float* g = gp + (o * bw_grows_ + Kh - 1) * bw_gw_;
      pad_rows(dy + at, mask ? mask + at : nullptr, oh_, ow_, 0, bw_gw_, g);
      Vec sum0{}, sum1{};
      int64_t i = 0;
      for (; i + 2 * L <= oh_ * bw_gw_; i += 2 * L) sum0 += load(g + i), sum1 += load(g + i + L);
      for (; i < oh_ * bw_gw_; i += L) sum0 += load(g + i);
      acc[nw + o] += sum0 + sum1;
    }
    WeightGradArgs a{nullptr, nullptr, H, bw_wp_, bw_gw_, s.pad_h, Kh, nullptr};
    for (int64_t o = 0; o < O; ++o)
      for (int64_t c = 0; c < C; ++c) {
        a.x = xp + c * H * bw_wp_;
        a.g = gp + o * bw_grows_ * bw_gw_;
        a.acc = acc + (o * C + c) * taps;
        for (int64_t kh = 0; kh < Kh; kh += khb)
          pick_weight_grad(Kw, static_cast<int>(std::min<int64_t>(khb, Kh - kh)))(a, kh);
      }
  }
  // Threads' partial sums, then the lanes.
  const Vec* acc = reinterpret_cast<const Vec*>(bw_acc_.data<float>());
  for (int64_t i = 0; i < nw + O; ++i) {
    Vec v = acc[i];
    for (int t = 1; t < threads_; ++t) v += acc[t * (nw + O) + i];
    if (i < nw) {
      dw[i] = lane_sum(v);
    } else if (db) {
      db[i - nw] = lane_sum(v);
    }
  }
}

}  // namespace dtrain::cpu
