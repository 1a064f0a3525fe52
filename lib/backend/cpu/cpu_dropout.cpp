// Inverted dropout with a counter-based mask: element i is kept iff
// random_uniform(seed, stream, i) >= p, so the mask is the same for any thread count and on
// the CUDA backend, and backward needs only the 1-byte mask. On a channel-blocked tensor the
// mask, stored in the tensor's own order, is drawn with each element's plain index.
// In bf16 (DropoutSpec::dtype) the mask is the same as in f32 (the draw does not depend on the
// data); each kept value is scaled in f32 and rounded to bf16 once.
#include "backend/cpu/bf16.h"  // bf16_t, conversions
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/rng.h"

namespace dtrain::cpu {
namespace {

// x·scale in the activations' type E (float, or bf16: widened, multiplied in f32, rounded once).
inline float scaled(float x, float scale) {
  return x * scale;
}
inline bf16_t scaled(bf16_t x, float scale) {
  return f32_to_bf16(bf16_to_f32(x) * scale);
}

class CpuDropout final : public DropoutOp {
 public:
  explicit CpuDropout(const DropoutSpec& s) : spec_(s), numel_(s.shape.numel()) {
    DTRAIN_CHECK(s.block == 1 || (s.shape.rank() == 4 && s.shape[1] % s.block == 0))
        << "dropout: blocks of " << s.block << " for " << s.shape.str();
    DTRAIN_CHECK(s.dtype == DType::f32 || s.dtype == DType::bf16)
        << "dropout: " << dtype_name(s.dtype) << " is not supported";
  }

  void forward(const Tensor& x, const Tensor& y, const Tensor& mask, float p, uint64_t seed,
               uint64_t stream) override {
    DTRAIN_CHECK(x.numel() <= numel_ && y.numel() == x.numel() && mask.numel() >= x.numel())
        << "dropout: size mismatch";
    check_dtype(x);
    check_dtype(y);
    if (spec_.dtype == DType::bf16)
      forward_as<bf16_t>(x, y, mask, p, seed, stream);
    else
      forward_as<float>(x, y, mask, p, seed, stream);
  }

  void backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) override {
    check_dtype(dy);
    check_dtype(dx);
    if (spec_.dtype == DType::bf16)
      backward_as<bf16_t>(dy, mask, p, dx);
    else
      backward_as<float>(dy, mask, p, dx);
  }

 private:
  void check_dtype(const Tensor& t) const {
    DTRAIN_CHECK(t.dtype() == spec_.dtype) << "dropout: a " << dtype_name(t.dtype())
                                           << " tensor for a " << dtype_name(spec_.dtype) << " op";
  }

  // E: the activations' type, float or bf16_t.
  template <class E>
  void forward_as(const Tensor& x, const Tensor& y, const Tensor& mask, float p, uint64_t seed,
                  uint64_t stream) const {
    const int64_t n = x.numel();
    const E* xp = x.data<E>();
    E* yp = y.data<E>();
    uint8_t* m = mask.data<uint8_t>();
    const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    if (spec_.block > 1) return forward_blocked(xp, yp, m, n, p, keep_scale, seed, stream);
#pragma omp parallel for if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = random_uniform(seed, stream, static_cast<uint64_t>(i)) >= p;
      m[i] = keep;
      yp[i] = keep ? scaled(xp[i], keep_scale) : E{0};
    }
  }

  template <class E>
  void backward_as(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) const {
    const int64_t n = dy.numel();
    const E* g = dy.data<E>();
    const uint8_t* m = mask.data<uint8_t>();
    E* d = dx.data<E>();
    const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for simd if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) d[i] = m[i] ? scaled(g[i], keep_scale) : E{0};
  }

  // Memory order (n, c/B, h, w, c%B); the random number is the plain index's.
  template <class E>
  void forward_blocked(const E* xp, E* yp, uint8_t* m, int64_t n, float p, float keep_scale,
                       uint64_t seed, uint64_t stream) const {
    const int64_t C = spec_.shape[1], H = spec_.shape[2], W = spec_.shape[3], B = spec_.block;
    const int64_t groups = n / (H * W * B);  // (sample, channel group) pairs
#pragma omp parallel for if (n > (1 << 16))
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t sample = g / (C / B), first = (g % (C / B)) * B;
      for (int64_t pixel = 0; pixel < H * W; ++pixel)
        for (int64_t l = 0; l < B; ++l) {
          const int64_t i = (g * H * W + pixel) * B + l;
          const auto plain = static_cast<uint64_t>((sample * C + first + l) * H * W + pixel);
          const bool keep = random_uniform(seed, stream, plain) >= p;
          m[i] = keep;
          yp[i] = keep ? scaled(xp[i], keep_scale) : E{0};
        }
    }
  }

  DropoutSpec spec_;
  int64_t numel_;
};

}  // namespace

std::unique_ptr<DropoutOp> make_dropout(const DropoutSpec& spec) {
  return std::make_unique<CpuDropout>(spec);
}

}  // namespace dtrain::cpu
