// Inverted dropout with a counter-based mask: element i is kept iff
// random_uniform(seed, stream, i) >= p, so the mask is the same for any thread count and on
// the CUDA backend, and backward needs only the 1-byte mask. On a channel-blocked tensor the
// mask, stored in the tensor's own order, is drawn with each element's plain index.
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/rng.h"

namespace dtrain::cpu {
namespace {

class CpuDropout final : public DropoutOp {
 public:
  explicit CpuDropout(const DropoutSpec& s) : spec_(s), numel_(s.shape.numel()) {
    DTRAIN_CHECK(s.block == 1 || (s.shape.rank() == 4 && s.shape[1] % s.block == 0))
        << "dropout: blocks of " << s.block << " for " << s.shape.str();
  }

  void forward(const Tensor& x, const Tensor& y, const Tensor& mask, float p, uint64_t seed,
               uint64_t stream) override {
    DTRAIN_CHECK(x.numel() <= numel_ && y.numel() == x.numel() && mask.numel() >= x.numel())
        << "dropout: size mismatch";
    const int64_t n = x.numel();
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    uint8_t* m = mask.data<uint8_t>();
    const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    if (spec_.block > 1) return forward_blocked(xp, yp, m, n, p, keep_scale, seed, stream);
#pragma omp parallel for if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = random_uniform(seed, stream, static_cast<uint64_t>(i)) >= p;
      m[i] = keep;
      yp[i] = keep ? xp[i] * keep_scale : 0.0f;
    }
  }

  void backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) override {
    const int64_t n = dy.numel();
    const float* g = dy.data<float>();
    const uint8_t* m = mask.data<uint8_t>();
    float* d = dx.data<float>();
    const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for simd if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) d[i] = m[i] ? g[i] * keep_scale : 0.0f;
  }

 private:
  // Memory order (n, c/B, h, w, c%B); the random number is the plain index's.
  void forward_blocked(const float* xp, float* yp, uint8_t* m, int64_t n, float p, float keep_scale,
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
          yp[i] = keep ? xp[i] * keep_scale : 0.0f;
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
