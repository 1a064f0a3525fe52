// Layer normalisation over the last axis, one row per loop iteration, vectorised along the
// row. The backward's parameter gradients are sums over rows: each block of kRowBlock rows
// writes its partial sums, and the blocks are added in order, so the bits do not depend on
// the thread count.
// Rows of a multiple of 16 features (every GPT width) take 16-float vectors with the row's sums
// reduced as a tree (simd::tree_sum): OpenMP's simd reductions ended each of the row's sums in
// 16 scalar additions through memory: a quarter to a third slower on the baby GPT's rows
// (bench/results/2026-11-27-lm-vs-pytorch.md).
#include <algorithm>  // min
#include <cmath>      // sqrt
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/simd.h"
#include "core/error.h"

namespace dtrain::cpu {
namespace {

constexpr int64_t kRowBlock = 32;
// Below this many elements one thread is faster than waking a team.
constexpr int64_t kParallelThreshold = 1 << 14;

class CpuLayerNorm final : public LayerNormOp {
 public:
  explicit CpuLayerNorm(const LayerNormSpec& s)
      : spec_(s), partial_(2 * ((s.rows + kRowBlock - 1) / kRowBlock) * s.features) {}

  void forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y,
               const Tensor& mean, const Tensor& rstd) override {
    const int64_t F = spec_.features, rows = rows_of(x);
    DTRAIN_CHECK(y.numel() == x.numel() && mean.numel() >= rows && rstd.numel() >= rows &&
                 gamma.numel() == F && (!spec_.bias || beta.numel() == F))
        << "layer norm: sizes differ";
    const float* xp = x.data<float>();
    const float* g = gamma.data<float>();
    const float* b = spec_.bias ? beta.data<float>() : nullptr;
    float* yp = y.data<float>();
    float* mp = mean.data<float>();
    float* rp = rstd.data<float>();
    const float eps = spec_.epsilon;
    if (F % simd::L == 0) {
#pragma omp parallel for if (x.numel() > kParallelThreshold)
      for (int64_t r = 0; r < rows; ++r)
        forward_row(xp + r * F, g, b, yp + r * F, F, eps, mp[r], rp[r]);
      return;
    }
#pragma omp parallel for if (x.numel() > kParallelThreshold)
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = xp + r * F;
      float* out = yp + r * F;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < F; ++c) sum += in[c];
      const float mu = sum / static_cast<float>(F);
      // Two passes: the variance of the centred values loses nothing to cancellation.
      float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
      for (int64_t c = 0; c < F; ++c) sq += (in[c] - mu) * (in[c] - mu);
      const float rs = 1.0f / std::sqrt(sq / static_cast<float>(F) + eps);
      mp[r] = mu;
      rp[r] = rs;
      if (b) {
#pragma omp simd
        for (int64_t c = 0; c < F; ++c) out[c] = (in[c] - mu) * rs * g[c] + b[c];
      } else {
#pragma omp simd
        for (int64_t c = 0; c < F; ++c) out[c] = (in[c] - mu) * rs * g[c];
      }
    }
  }

  // dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)) with ĝ = dy·gamma and x̂ = (x − mean)·rstd;
  // dgamma = Σ_rows dy·x̂, dbeta = Σ_rows dy.
  void backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                const Tensor& rstd, const Tensor& dx, const Tensor& dgamma,
                const Tensor& dbeta) override {
    const int64_t F = spec_.features, rows = rows_of(x);
    DTRAIN_CHECK(dy.numel() == x.numel() && dx.numel() == x.numel() && dgamma.numel() == F &&
                 (!spec_.bias || dbeta.numel() == F))
        << "layer norm: sizes differ";
    const float* xp = x.data<float>();
    const float* gp = dy.data<float>();
    const float* g = gamma.data<float>();
    const float* mp = mean.data<float>();
    const float* rp = rstd.data<float>();
    float* dxp = dx.data<float>();
    const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
    float* part_gamma = partial_.data();
    float* part_beta = partial_.data() + blocks * F;
    const float inv_f = 1.0f / static_cast<float>(F);
#pragma omp parallel for if (x.numel() > kParallelThreshold)
    for (int64_t k = 0; k < blocks; ++k) {
      float* pg = part_gamma + k * F;
      float* pb = part_beta + k * F;
#pragma omp simd
      for (int64_t c = 0; c < F; ++c) pg[c] = pb[c] = 0.0f;
      for (int64_t r = k * kRowBlock; r < std::min(rows, (k + 1) * kRowBlock); ++r) {
        if (F % simd::L == 0) {
          backward_row(xp + r * F, gp + r * F, g, mp[r], rp[r], dxp + r * F, pg, pb, F, inv_f);
          continue;
        }
        const float* in = xp + r * F;
        const float* grad = gp + r * F;
        float* out = dxp + r * F;
        const float mu = mp[r], rs = rp[r];
        float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int64_t c = 0; c < F; ++c) {
          const float xhat = (in[c] - mu) * rs, ghat = grad[c] * g[c];
          sum_g += ghat;
          sum_gx += ghat * xhat;
          pg[c] += grad[c] * xhat;
          pb[c] += grad[c];
        }
        const float mean_g = sum_g * inv_f, mean_gx = sum_gx * inv_f;
#pragma omp simd
        for (int64_t c = 0; c < F; ++c) {
          const float xhat = (in[c] - mu) * rs;
          out[c] = rs * (grad[c] * g[c] - mean_g - xhat * mean_gx);
        }
      }
    }
    float* dg = dgamma.data<float>();
    float* db = spec_.bias ? dbeta.data<float>() : nullptr;
#pragma omp parallel for if (blocks * F > kParallelThreshold)
    for (int64_t c = 0; c < F; ++c) {
      float sg = 0.0f, sb = 0.0f;
      for (int64_t k = 0; k < blocks; ++k) {
        sg += part_gamma[k * F + c];
        sb += part_beta[k * F + c];
      }
      dg[c] = sg;
      if (db) db[c] = sb;
    }
  }

 private:
  // One row of F (a multiple of 16) features: y, and the row's mean and 1/σ.
  static void forward_row(const float* in, const float* g, const float* b, float* out, int64_t F,
                          float eps, float& mean, float& rstd) {
    using simd::load, simd::store, simd::Vec, simd::L;
    Vec acc{};
    for (int64_t c = 0; c < F; c += L) acc += load(in + c);
    const float mu = simd::tree_sum(acc) / static_cast<float>(F);
    // Two passes: the variance of the centred values loses nothing to cancellation.
    acc = Vec{};
    for (int64_t c = 0; c < F; c += L) {
      const Vec d = load(in + c) - mu;
      acc += d * d;
    }
    const float rs = 1.0f / std::sqrt(simd::tree_sum(acc) / static_cast<float>(F) + eps);
    mean = mu;
    rstd = rs;
    for (int64_t c = 0; c < F; c += L) {
      const Vec y = (load(in + c) - mu) * rs * load(g + c);
      store(out + c, b ? y + load(b + c) : y);
    }
  }

  // One row's dx, its terms of dgamma and dbeta added into pg and pb (F a multiple of 16).
  static void backward_row(const float* in, const float* grad, const float* g, float mu, float rs,
                           float* out, float* pg, float* pb, int64_t F, float inv_f) {
    using simd::load, simd::store, simd::Vec, simd::L;
    Vec sum_g{}, sum_gx{};
    for (int64_t c = 0; c < F; c += L) {
      const Vec dy = load(grad + c), xhat = (load(in + c) - mu) * rs, ghat = dy * load(g + c);
      sum_g += ghat;
      sum_gx += ghat * xhat;
      store(pg + c, load(pg + c) + dy * xhat);
      store(pb + c, load(pb + c) + dy);
    }
    const float mean_g = simd::tree_sum(sum_g) * inv_f, mean_gx = simd::tree_sum(sum_gx) * inv_f;
    for (int64_t c = 0; c < F; c += L) {
      const Vec xhat = (load(in + c) - mu) * rs;
      store(out + c, rs * (load(grad + c) * load(g + c) - mean_g - xhat * mean_gx));
    }
  }

  int64_t rows_of(const Tensor& x) const {
    const int64_t rows = x.numel() / spec_.features;
    DTRAIN_CHECK(rows * spec_.features == x.numel() && rows <= spec_.rows)
        << "layer norm: " << x.shape().str() << " is not up to " << spec_.rows << " rows of "
        << spec_.features;
    return rows;
  }

  LayerNormSpec spec_;
  // Per block of rows: the partial sums of dgamma, then of dbeta.
  std::vector<float> partial_;
};

}  // namespace

std::unique_ptr<LayerNormOp> make_layer_norm(const LayerNormSpec& spec) {
  DTRAIN_CHECK(spec.features > 0 && spec.rows >= 0) << "layer norm: bad spec";
  return std::make_unique<CpuLayerNorm>(spec);
}

}  // namespace dtrain::cpu
