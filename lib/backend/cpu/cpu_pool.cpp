// Max and average pooling over plain NCHW, as direct loops. oneDNN's pooling primitives want
// blocked layouts: on NCHW tensors they transpose through one on every call, ~10× slower than this
// on LeNet's 64×6×28×28 pool (bench/results/2026-11-22-cpu-direct-kernels.md). Windows follow
// PyTorch: a window may overhang the input only through padding or ceil mode; include-padding
// averages divide by the part of the window inside the padded input, as PyTorch and Caffe do.
// The max-pool workspace holds, per output, the index of the chosen input within its plane.
// Channel-blocked tensors (spec.block B) pool B channels of a pixel at once, one vector per
// window position; their workspace holds, per output element, the chosen position within its
// window in one byte (a quarter of an index: max pooling's memory per sample of batch).
// In bf16 (spec.dtype) the same loops read bf16, compute in f32 and round each output once:
// the maxima and their indices are those of the f32 op on the same values, and averages and
// gradients are the f32 op's rounded to bf16. The backward sums a plane's gradients in an f32
// buffer of its thread before rounding them. The vector loops (16-channel blocks, the plain 2×2
// forward) read and write bf16 lanes as well.
#include <algorithm>  // min, max
#include <cstring>    // memset
#include <limits>
#include <type_traits>  // is_same_v: f32's vector paths
#include <vector>

#ifdef __AVX512BW__
#include <immintrin.h>  // masked loads and stores of 16-bit lanes
#endif

#include "backend/cpu/bf16.h"  // bf16_t, conversions
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/simd.h"  // 2×2 max pooling on vectors
#include "core/error.h"

namespace dtrain::cpu {
namespace {

// An element as f32, and an f32 stored as an element (rounded to nearest even for bf16).
inline float widen(float v) {
  return v;
}
inline float widen(bf16_t v) {
  return bf16_to_f32(v);
}
inline void put(float* p, float v) {
  *p = v;
}
inline void put(bf16_t* p, float v) {
  *p = f32_to_bf16(v);
}

// 16 elements as one f32 vector, and back (bf16: widened exactly, rounded to nearest even with
// bf16.h's arithmetic on all lanes at once).
inline simd::Vec load_lanes(const float* p) {
  return simd::load(p);
}
inline void store_lanes(float* p, simd::Vec v) {
  simd::store(p, v);
}
typedef uint16_t Bf16Lanes __attribute__((vector_size(32)));
typedef uint32_t U32Lanes __attribute__((vector_size(64)));
inline simd::Vec widen_lanes(Bf16Lanes b) {
  return reinterpret_cast<simd::Vec>(__builtin_convertvector(b, U32Lanes) << 16);
}
inline Bf16Lanes round_lanes(simd::Vec v) {
  const U32Lanes u = reinterpret_cast<U32Lanes>(v);
  const U32Lanes rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const U32Lanes quiet_nan = (u >> 16) | 0x40u;
  return __builtin_convertvector((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded, Bf16Lanes);
}
inline simd::Vec load_lanes(const bf16_t* p) {
  Bf16Lanes b;
  std::memcpy(&b, p, sizeof b);
  return widen_lanes(b);
}
inline void store_lanes(bf16_t* p, simd::Vec v) {
  const Bf16Lanes b = round_lanes(v);
  std::memcpy(p, &b, sizeof b);
}

// The first n lanes (0 ≤ n ≤ 16); the others read as 0 and are not written.
inline simd::Vec load_lanes(const float* p, int64_t n) {
  return simd::load_part(p, n);
}
inline void store_lanes(float* p, simd::Vec v, int64_t n) {
  simd::store_part(p, v, n);
}
inline simd::Vec load_lanes(const bf16_t* p, int64_t n) {
#ifdef __AVX512BW__
  const __m256i b = _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), p);
  return widen_lanes(reinterpret_cast<Bf16Lanes>(b));
#else
  Bf16Lanes b{};
  std::memcpy(&b, p, sizeof(bf16_t) * n);
  return widen_lanes(b);
#endif
}
inline void store_lanes(bf16_t* p, simd::Vec v, int64_t n) {
  const Bf16Lanes b = round_lanes(v);
#ifdef __AVX512BW__
  _mm256_mask_storeu_epi16(p, static_cast<__mmask16>((1u << n) - 1), reinterpret_cast<__m256i>(b));
#else
  std::memcpy(p, &b, sizeof(bf16_t) * n);
#endif
}

// Where a plane's input gradient is summed: dx itself in f32; in bf16 an f32 buffer of the
// calling thread, which store_plane then rounds into dx.
inline float* gradient_sums(float* dx, int64_t) {
  return dx;
}
inline float* gradient_sums(bf16_t*, int64_t n) {
  thread_local std::vector<float> sums;
  if (static_cast<int64_t>(sums.size()) < n) sums.resize(n);
  return sums.data();
}
inline void store_plane(float*, const float*, int64_t) {}
inline void store_plane(bf16_t* dx, const float* sums, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = f32_to_bf16(sums[i]);
}

struct Window {
  int64_t h0, h1, w0, w1;  // clipped to the input
  float divisor;           // for averages
  bool interior;           // the whole kernel lies inside the input
};

// Max over a k×k window that lies inside the plane, kernel size known at compile time so the
// common 2×2 and 3×3 pools unroll. Returns the argmax as an offset from `base`.
template <int K, class T>
inline float window_max(const T* base, int64_t width, int32_t* arg) {
  float best = widen(base[0]);
  int32_t at = 0;
  for (int h = 0; h < K; ++h)
    for (int w = 0; w < K; ++w) {
      const float v = widen(base[h * width + w]);
      if (v > best) best = v, at = static_cast<int32_t>(h * width + w);
    }
  *arg = at;
  return best;
}

// T: the activations' element type, float or bf16_t.
template <class T>
class CpuPool final : public PoolOp {
  static constexpr bool kF32 = std::is_same_v<T, float>;

 public:
  explicit CpuPool(const PoolSpec& s) : s_(s), oh_(s.out_height()), ow_(s.out_width()) {
    DTRAIN_CHECK(s.block == 1 || ((s.block == 8 || s.block == 16) && s.channels % s.block == 0))
        << "pooling: no blocks of " << s.block << " for " << s.input_shape().str();
    DTRAIN_CHECK(s.block == 1 || s.kernel_h * s.kernel_w <= 256)
        << "pooling: a window of more than 256 positions on a blocked tensor";
    DTRAIN_CHECK(oh_ > 0 && ow_ > 0)
        << "pooling output would be empty for input " << s.input_shape().str();
    DTRAIN_CHECK(s.pad_h < s.kernel_h && s.pad_w < s.kernel_w) << "pooling padding >= kernel";
    simple_2x2_ = s.kernel_h == 2 && s.kernel_w == 2 && s.stride_h == 2 && s.stride_w == 2 &&
                  s.pad_h == 0 && s.pad_w == 0 && 2 * oh_ <= s.height && 2 * ow_ <= s.width;
    windows_.reserve(oh_ * ow_);
    for (int64_t i = 0; i < oh_; ++i)
      for (int64_t j = 0; j < ow_; ++j) windows_.push_back(window(i, j));
  }

  size_t workspace_bytes() const override {
    const size_t bytes_per_output = s_.block > 1 ? 1 : 4;
    return s_.kind == PoolKind::max ? static_cast<size_t>(planes() * oh_ * ow_) * bytes_per_output
                                    : 0;
  }

  void forward(const Tensor& x, const Tensor& y, const Tensor& workspace, bool training) override {
    const int64_t rows = x.shape()[0];  // a smaller last batch uses the front of the buffers
    const int64_t n_planes = rows * s_.channels, in_plane = s_.height * s_.width,
                  out_plane = oh_ * ow_;
    DTRAIN_CHECK(y.numel() >= n_planes * out_plane) << "pooling output too small";
    check_dtype(x, "x"), check_dtype(y, "y");
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    const bool keep_index = s_.kind == PoolKind::max && training;
    if (keep_index) {
      DTRAIN_CHECK(workspace.bytes() >= workspace_bytes()) << "pool workspace";
    }
    uint8_t* positions = keep_index ? static_cast<uint8_t*>(workspace.raw()) : nullptr;
    if (s_.block == 16) return forward_blocked<16>(xp, yp, positions, rows);
    if (s_.block == 8) return forward_blocked<8>(xp, yp, positions, rows);
    int32_t* idx = keep_index ? workspace.data<int32_t>() : nullptr;
#pragma omp parallel for if (n_planes * in_plane > (1 << 16))
    for (int64_t p = 0; p < n_planes; ++p) {
      const T* in = xp + p * in_plane;
      T* out = yp + p * out_plane;
      if (s_.kind == PoolKind::max) {
        max_plane(in, out, idx ? idx + p * out_plane : nullptr);
      } else {
        avg_plane(in, out);
      }
    }
  }

  void backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor& workspace,
                const Tensor& dx) override {
    const int64_t rows = dx.shape()[0];
    const int64_t n_planes = rows * s_.channels, in_plane = s_.height * s_.width,
                  out_plane = oh_ * ow_;
    check_dtype(dy, "dy"), check_dtype(dx, "dx");
    const T* g = dy.data<T>();
    T* d = dx.data<T>();
    const bool max = s_.kind == PoolKind::max;
    const auto* positions = max ? static_cast<const uint8_t*>(workspace.raw()) : nullptr;
    if (s_.block == 16) return backward_blocked<16>(g, positions, d, rows);
    if (s_.block == 8) return backward_blocked<8>(g, positions, d, rows);
    const int32_t* idx = max ? workspace.data<int32_t>() : nullptr;
#pragma omp parallel for if (n_planes * in_plane > (1 << 16))
    for (int64_t p = 0; p < n_planes; ++p) {
      T* dx_plane = d + p * in_plane;
      const T* gout = g + p * out_plane;
      if constexpr (kF32) {                    // bf16 sums in f32 below and rounds once
        if (idx && simple_2x2_ && ow_ >= 8) {  // narrower rows: the scatter is cheaper
          max_backward_2x2(gout, idx + p * out_plane, dx_plane);
          continue;
        }
      }
      float* din = gradient_sums(dx_plane, in_plane);
      std::memset(din, 0, sizeof(float) * in_plane);
      if (idx) {
        const int32_t* ip = idx + p * out_plane;
        for (int64_t o = 0; o < out_plane; ++o) din[ip[o]] += widen(gout[o]);
      } else {
        for (int64_t o = 0; o < out_plane; ++o) {
          const Window& w = windows_[o];
          const float v = widen(gout[o]) / w.divisor;
          for (int64_t h = w.h0; h < w.h1; ++h)
            for (int64_t c = w.w0; c < w.w1; ++c) din[h * s_.width + c] += v;
        }
      }
      store_plane(dx_plane, din, in_plane);
    }
  }

 private:
  // Blocked forward: per group of B channels of a sample, an [H, W, B] plane in, [OH, OW, B]
  // out; the scan order and ties as the plain path's (first maximum wins).
  template <int B>
  void forward_blocked(const T* xp, T* yp, uint8_t* idx, int64_t rows) const {
    const int64_t groups = rows * s_.channels / B, in_plane = s_.height * s_.width,
                  out_plane = oh_ * ow_;
    const bool max = s_.kind == PoolKind::max;
    if constexpr (B == simd::L) {  // one vector per pixel
      return max ? max_blocked_vec(xp, yp, idx, groups) : avg_blocked_vec(xp, yp, groups);
    }
#pragma omp parallel for if (groups * in_plane * B > (1 << 16))
    for (int64_t g = 0; g < groups; ++g) {
      const T* in = xp + g * in_plane * B;
      T* out = yp + g * out_plane * B;
      uint8_t* at = idx ? idx + g * out_plane * B : nullptr;
      for (int64_t o = 0; o < out_plane; ++o) {
        const Window& w = windows_[o];
        float acc[B];
        uint8_t arg[B];
        for (int l = 0; l < B; ++l) {
          acc[l] = max ? -std::numeric_limits<float>::infinity() : 0.0f;
          arg[l] = 0;
        }
        uint8_t position = 0;
        for (int64_t h = w.h0; h < w.h1; ++h)
          for (int64_t c = w.w0; c < w.w1; ++c, ++position) {
            const T* v = in + (h * s_.width + c) * B;
            if (max) {
              for (int l = 0; l < B; ++l) {
                const float x = widen(v[l]);
                const bool wins = x > acc[l];
                acc[l] = wins ? x : acc[l];
                arg[l] = wins ? position : arg[l];
              }
            } else {
              for (int l = 0; l < B; ++l) acc[l] += widen(v[l]);
            }
          }
        T* y = out + o * B;
        if (max) {
          for (int l = 0; l < B; ++l) put(y + l, acc[l]);
          if (at)
            for (int l = 0; l < B; ++l) at[o * B + l] = arg[l];
        } else {
          for (int l = 0; l < B; ++l) put(y + l, acc[l] / w.divisor);
        }
      }
    }
  }

  // Max pooling of 16-channel blocks, a vector per window position: the comparison picks the
  // value and the pixel together (ties: the first in scan order, as everywhere).
  void max_blocked_vec(const T* xp, T* yp, uint8_t* idx, int64_t groups) const {
    using namespace simd;
    const int64_t in_plane = s_.height * s_.width, out_plane = oh_ * ow_;
#pragma omp parallel for if (groups * in_plane * L > (1 << 16))
    for (int64_t g = 0; g < groups; ++g) {
      const T* in = xp + g * in_plane * L;
      T* out = yp + g * out_plane * L;
      uint8_t* at = idx ? idx + g * out_plane * L : nullptr;
      for (int64_t o = 0; o < out_plane; ++o) {
        const Window& w = windows_[o];
        Vec best = load_lanes(in + (w.h0 * s_.width + w.w0) * L);
        IVec arg{};
        int32_t position = 0;
        for (int64_t h = w.h0; h < w.h1; ++h)
          for (int64_t c = w.w0; c < w.w1; ++c, ++position) {
            const Vec v = load_lanes(in + (h * s_.width + c) * L);
            const IVec wins = v > best;
            best = wins ? v : best;
            arg = wins ? IVec{} + position : arg;
          }
        store_lanes(out + o * L, best);
        if (at)
          for (int l = 0; l < L; ++l) at[o * L + l] = static_cast<uint8_t>(arg[l]);
      }
    }
  }

  // Average pooling of 16-channel blocks: the sums in the plain path's order, lane by lane.
  void avg_blocked_vec(const T* xp, T* yp, int64_t groups) const {
    using namespace simd;
    const int64_t in_plane = s_.height * s_.width, out_plane = oh_ * ow_;
#pragma omp parallel for if (groups * in_plane * L > (1 << 16))
    for (int64_t g = 0; g < groups; ++g) {
      const T* in = xp + g * in_plane * L;
      T* out = yp + g * out_plane * L;
      for (int64_t o = 0; o < out_plane; ++o) {
        const Window& w = windows_[o];
        Vec sum{};
        for (int64_t h = w.h0; h < w.h1; ++h)
          for (int64_t c = w.w0; c < w.w1; ++c) sum += load_lanes(in + (h * s_.width + c) * L);
        store_lanes(out + o * L, sum / w.divisor);
      }
    }
  }

  template <int B>
  void backward_blocked(const T* gp, const uint8_t* idx, T* dp, int64_t rows) const {
    const int64_t groups = rows * s_.channels / B, in_plane = s_.height * s_.width,
                  out_plane = oh_ * ow_;
#pragma omp parallel for if (groups * in_plane * B > (1 << 16))
    for (int64_t g = 0; g < groups; ++g) {
      T* dx_plane = dp + g * in_plane * B;
      float* din = gradient_sums(dx_plane, in_plane * B);
      const T* gout = gp + g * out_plane * B;
      std::memset(din, 0, sizeof(float) * in_plane * B);
      if (idx) {
        const uint8_t* at = idx + g * out_plane * B;
        int64_t pixel_of[256];  // window position → pixel of the plane
        for (int64_t o = 0; o < out_plane; ++o) {
          const Window& w = windows_[o];
          int64_t n = 0;
          for (int64_t h = w.h0; h < w.h1; ++h)
            for (int64_t c = w.w0; c < w.w1; ++c) pixel_of[n++] = h * s_.width + c;
          for (int l = 0; l < B; ++l)
            din[pixel_of[at[o * B + l]] * B + l] += widen(gout[o * B + l]);
        }
        store_plane(dx_plane, din, in_plane * B);
        continue;
      }
      for (int64_t o = 0; o < out_plane; ++o) {
        const Window& w = windows_[o];
        float v[B];
        for (int l = 0; l < B; ++l) v[l] = widen(gout[o * B + l]) / w.divisor;
        for (int64_t h = w.h0; h < w.h1; ++h)
          for (int64_t c = w.w0; c < w.w1; ++c) {
            float* to = din + (h * s_.width + c) * B;
            for (int l = 0; l < B; ++l) to[l] += v[l];
          }
      }
      store_plane(dx_plane, din, in_plane * B);
    }
  }

  void check_dtype(const Tensor& t, const char* what) const {
    DTRAIN_CHECK(t.dtype() == s_.dtype) << "pooling: " << what << " is " << dtype_name(t.dtype())
                                        << ", the op's dtype " << dtype_name(s_.dtype);
  }

  int64_t planes() const {
    return s_.batch * s_.channels;
  }

  Window window(int64_t i, int64_t j) const {
    const int64_t hs = i * s_.stride_h - s_.pad_h, ws = j * s_.stride_w - s_.pad_w;
    // Include-padding averages count the window up to the padded border, not beyond it.
    const int64_t he_pad = std::min(hs + s_.kernel_h, s_.height + s_.pad_h);
    const int64_t we_pad = std::min(ws + s_.kernel_w, s_.width + s_.pad_w);
    Window w{std::max<int64_t>(hs, 0),
             std::min(hs + s_.kernel_h, s_.height),
             std::max<int64_t>(ws, 0),
             std::min(ws + s_.kernel_w, s_.width),
             1.0f,
             false};
    w.interior =
        hs >= 0 && ws >= 0 && hs + s_.kernel_h <= s_.height && ws + s_.kernel_w <= s_.width;
    const int64_t inside = (w.h1 - w.h0) * (w.w1 - w.w0);
    w.divisor = static_cast<float>(s_.avg_include_padding ? (he_pad - hs) * (we_pad - ws) : inside);
    return w;
  }

  // 2×2, stride 2, no padding (LeNet, VGG): 16 outputs of a row at a time, the even and odd
  // columns of each input row split by a two-register shuffle, no branches (the compiler left
  // the scalar version branchy, and ReLU outputs' ties made it mispredict: ~10× slower on LeNet's
  // 64×6×28×28). Ties pick the first maximum in scan order, as the general path.
  void max_plane_2x2(const T* in, T* out, int32_t* idx) const {
    using namespace simd;
    const IVec lane{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const int64_t W = s_.width;
    for (int64_t i = 0; i < oh_; ++i) {
      const T* r0 = in + 2 * i * W;
      const T* r1 = r0 + W;
      for (int64_t j = 0; j < ow_; j += L) {
        const int64_t n = std::min<int64_t>(L, ow_ - j), pairs = 2 * n;  // outputs, inputs
        auto row = [&](const T* r, Vec& left, Vec& right) {
          const Vec lo = load_lanes(r + 2 * j, std::min<int64_t>(L, pairs));
          const Vec hi = load_lanes(r + 2 * j + L, std::max<int64_t>(0, pairs - L));
          left = even_lanes(lo, hi);
          right = odd_lanes(lo, hi);
        };
        Vec a, b, c, d;
        row(r0, a, b);
        row(r1, c, d);
        const IVec b_wins = b > a, d_wins = d > c;
        const Vec top = b_wins ? b : a, bottom = d_wins ? d : c;
        const IVec bottom_wins = bottom > top;
        store_lanes(out + i * ow_ + j, bottom_wins ? bottom : top, n);
        if (!idx) continue;
        // Comparisons give −1 for true: subtracting adds the chosen column or row.
        const IVec top_at = IVec{} - b_wins, bottom_at = static_cast<int32_t>(W) - d_wins;
        const IVec at =
            static_cast<int32_t>(2 * i * W + 2 * j) + 2 * lane + (bottom_wins ? bottom_at : top_at);
        store_part(idx + i * ow_ + j, at, n);
      }
    }
  }

  // The backward of max_plane_2x2: windows do not overlap, so every input gets the gradient of
  // at most one output and is written once, from the chosen index — no clearing pass and no
  // scatter. Rows and columns that no window covers get zeros.
  void max_backward_2x2(const float* g, const int32_t* idx, float* din) const {
    using namespace simd;
    const IVec lane{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const int64_t W = s_.width;
    const int32_t w = static_cast<int32_t>(W);
    for (int64_t i = 0; i < oh_; ++i) {
      float* r0 = din + 2 * i * W;
      float* r1 = r0 + W;
      for (int64_t j = 0; j < ow_; j += L) {
        const int64_t n = std::min<int64_t>(L, ow_ - j), pairs = 2 * n;
        const Vec gv = load_part(g + i * ow_ + j, n);
        const IVec at = load_part(idx + i * ow_ + j, n);
        // Position inside the window: 0, 1 (top row), W, W + 1 (bottom row).
        const IVec rel = at - (static_cast<int32_t>(2 * i * W + 2 * j) + 2 * lane);
        auto row = [&](float* r, int32_t left) {
          const Vec a = rel == left ? gv : 0, b = rel == left + 1 ? gv : 0;
          store_part(r + 2 * j, interleave_low(a, b), std::min<int64_t>(L, pairs));
          store_part(r + 2 * j + L, interleave_high(a, b), std::max<int64_t>(0, pairs - L));
        };
        row(r0, 0);
        row(r1, w);
      }
      for (int64_t c = 2 * ow_; c < W; ++c) r0[c] = r1[c] = 0.0f;
    }
    for (int64_t c = 2 * oh_ * W; c < s_.height * W; ++c) din[c] = 0.0f;
  }

  void max_plane(const T* in, T* out, int32_t* idx) const {
    if (simple_2x2_) return max_plane_2x2(in, out, idx);
    const bool square = s_.kernel_h == s_.kernel_w;
    for (int64_t o = 0; o < oh_ * ow_; ++o) {
      const Window& w = windows_[o];
      if (w.interior && square && (s_.kernel_h == 2 || s_.kernel_h == 3)) {
        const int64_t start = w.h0 * s_.width + w.w0;
        int32_t arg;
        put(out + o, s_.kernel_h == 2 ? window_max<2>(in + start, s_.width, &arg)
                                      : window_max<3>(in + start, s_.width, &arg));
        if (idx) idx[o] = static_cast<int32_t>(start) + arg;
        continue;
      }
      float best = -std::numeric_limits<float>::infinity();
      int32_t arg = static_cast<int32_t>(w.h0 * s_.width + w.w0);
      for (int64_t h = w.h0; h < w.h1; ++h)
        for (int64_t c = w.w0; c < w.w1; ++c) {
          const float v = widen(in[h * s_.width + c]);
          if (v > best) best = v, arg = static_cast<int32_t>(h * s_.width + c);
        }
      put(out + o, best);
      if (idx) idx[o] = arg;
    }
  }

  void avg_plane(const T* in, T* out) const {
    for (int64_t o = 0; o < oh_ * ow_; ++o) {
      const Window& w = windows_[o];
      float sum = 0;
      for (int64_t h = w.h0; h < w.h1; ++h)
        for (int64_t c = w.w0; c < w.w1; ++c) sum += widen(in[h * s_.width + c]);
      put(out + o, sum / w.divisor);
    }
  }

  PoolSpec s_;
  int64_t oh_, ow_;
  std::vector<Window> windows_;  // per output position, shared by every plane
  bool simple_2x2_ = false;
};

}  // namespace

std::unique_ptr<PoolOp> make_pool(DnnlContext&, const PoolSpec& spec) {
  DTRAIN_CHECK(spec.dtype == DType::f32 || spec.dtype == DType::bf16)
      << "pooling: no " << dtype_name(spec.dtype) << " kernels";
  if (spec.dtype == DType::bf16) return std::make_unique<CpuPool<bf16_t>>(spec);
  return std::make_unique<CpuPool<float>>(spec);
}

}  // namespace dtrain::cpu
