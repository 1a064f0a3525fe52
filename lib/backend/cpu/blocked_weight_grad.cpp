#include "backend/cpu/blocked_weight_grad.h"

#include <omp.h>  // omp_get_thread_num

#include <algorithm>

#include "core/error.h"

namespace dtrain::cpu {

using simd::L;
using simd::Vec;

namespace {

// Output rows per sweep: their inputs and gradients (4 × 32 pixels × 64 B each) stay in L1
// across the kernel's taps. Measured at 32×32: 4 and 8 alike, 2 and 32 ~5–15 % slower.
constexpr int64_t kRowsPerSweep = 4;

// The outputs o in [lo, hi) whose input o + tap − pad lies in [0, size).
void valid_range(int64_t tap, int64_t pad, int64_t size, int64_t& lo, int64_t& hi) {
  lo = std::max(lo, pad - tap);
  hi = std::min(hi, size + pad - tap);
}

}  // namespace

bool blocked_weight_grad_suits(const ConvSpec& s) {
  return s.src_block == L && s.dst_block == L && s.stride_h == 1 && s.stride_w == 1 &&
         s.in_channels % L == 0 && s.out_channels % L == 0 && s.out_width() >= 32;
}

BlockedWeightGrad::BlockedWeightGrad(const ConvSpec& s, int threads)
    : s_(s), threads_(std::max(threads, 1)) {
  DTRAIN_CHECK(blocked_weight_grad_suits(s)) << "no blocked weight-gradient kernel for this shape";
  per_thread_ = (s.out_channels / L) * (s.in_channels / L) * s.kernel_h * s.kernel_w * L;
  sums_.resize(static_cast<size_t>(threads_ * per_thread_));
}

void BlockedWeightGrad::add_image(const float* x, const float* dy, int64_t n, Vec* sums) const {
  const int64_t in_blocks = s_.in_channels / L, out_blocks = s_.out_channels / L;
  const int64_t h = s_.height, w = s_.width, oh = s_.out_height(), ow = s_.out_width();
  const int64_t kh = s_.kernel_h, kw = s_.kernel_w;
  for (int64_t ob = 0; ob < out_blocks; ++ob) {
    const float* g = dy + (n * out_blocks + ob) * oh * ow * L;
    for (int64_t ib = 0; ib < in_blocks; ++ib) {
      const float* in = x + (n * in_blocks + ib) * h * w * L;
      Vec* block_sums = sums + (ob * in_blocks + ib) * kh * kw * L;
      for (int64_t row0 = 0; row0 < oh; row0 += kRowsPerSweep) {
        for (int64_t i = 0; i < kh; ++i) {
          int64_t r_lo = row0, r_hi = std::min(oh, row0 + kRowsPerSweep);
          valid_range(i, s_.pad_h, h, r_lo, r_hi);
          for (int64_t j = 0; j < kw; ++j) {
            int64_t c_lo = 0, c_hi = ow;
            valid_range(j, s_.pad_w, w, c_lo, c_hi);
            Vec acc[L] = {};
            for (int64_t r = r_lo; r < r_hi; ++r) {
              const float* grow = g + r * ow * L;
              const float* xrow = in + (r + i - s_.pad_h) * w * L;
              for (int64_t c = c_lo; c < c_hi; ++c) {
                const Vec gv = simd::load(grow + c * L);
                const float* xv = xrow + (c + j - s_.pad_w) * L;
#pragma GCC unroll 16
                for (int l = 0; l < L; ++l) acc[l] += gv * xv[l];
              }
            }
            Vec* tap = block_sums + (i * kw + j) * L;
#pragma GCC unroll 16
            for (int l = 0; l < L; ++l) tap[l] += acc[l];
          }
        }
      }
    }
  }
}

void BlockedWeightGrad::run(const float* x, const float* dy, float* dw, float* db) {
  std::fill(sums_.begin(), sums_.end(), Vec{});
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (int64_t n = 0; n < s_.batch; ++n)
    add_image(x, dy, n, sums_.data() + omp_get_thread_num() * per_thread_);
  for (int t = 1; t < threads_; ++t)
    for (int64_t k = 0; k < per_thread_; ++k) sums_[k] += sums_[t * per_thread_ + k];

  // sums [ob][ib][tap][input lane] (vectors over the output lanes) → dw [o][i][tap].
  const int64_t in_blocks = s_.in_channels / L, taps = s_.kernel_h * s_.kernel_w;
  for (int64_t ob = 0; ob < s_.out_channels / L; ++ob)
    for (int64_t ib = 0; ib < in_blocks; ++ib)
      for (int64_t t = 0; t < taps; ++t)
        for (int li = 0; li < L; ++li) {
          const Vec v = sums_[((ob * in_blocks + ib) * taps + t) * L + li];
          for (int lo = 0; lo < L; ++lo)
            dw[((ob * L + lo) * s_.in_channels + ib * L + li) * taps + t] = v[lo];
        }
  if (db == nullptr) return;
  // The bias gradient: dy summed over images and pixels, per output channel.
  const int64_t pixels = s_.out_height() * s_.out_width(), out_blocks = s_.out_channels / L;
  for (int64_t ob = 0; ob < out_blocks; ++ob) {
    Vec total{};
    for (int64_t n = 0; n < s_.batch; ++n) {
      const float* g = dy + (n * out_blocks + ob) * pixels * L;
      Vec image{};
      for (int64_t p = 0; p < pixels; ++p) image += simd::load(g + p * L);
      total += image;
    }
    simd::store(db + ob * L, total);
  }
}

}  // namespace dtrain::cpu
