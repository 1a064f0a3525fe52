// Inverted dropout with a counter-based mask: element i is kept iff
// random_uniform(seed, stream, i) >= p, so the mask is the same for any thread count and on
// the CUDA backend, and backward needs only the 1-byte mask.
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/rng.h"

namespace dtrain::cpu {
namespace {

class CpuDropout final : public DropoutOp {
 public:
  explicit CpuDropout(const Shape& shape) : numel_(shape.numel()) {}

  void forward(const Tensor& x, const Tensor& y, const Tensor& mask, float p, uint64_t seed,
               uint64_t stream) override {
    DTRAIN_CHECK(x.numel() <= numel_ && y.numel() == x.numel() && mask.numel() >= x.numel())
        << "dropout: size mismatch";
    const int64_t n = x.numel();
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    uint8_t* m = mask.data<uint8_t>();
    const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
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
  int64_t numel_;
};

}  // namespace

std::unique_ptr<DropoutOp> make_dropout(const Shape& shape) {
  return std::make_unique<CpuDropout>(shape);
}

}  // namespace dtrain::cpu
