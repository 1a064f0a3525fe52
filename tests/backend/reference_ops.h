// Naive double-precision reference implementations the backend ops are checked against.
#pragma once
#include <cmath>
#include <vector>

#include "backend/ops.h"

namespace dtrain::test {

inline std::vector<double> ref_conv(const ConvSpec& s, const float* x, const float* w,
                                    const float* b) {
  const int64_t oh = s.out_height(), ow = s.out_width();
  std::vector<double> y(s.batch * s.out_channels * oh * ow);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t o = 0; o < s.out_channels; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b ? b[o] : 0.0;
          for (int64_t c = 0; c < s.in_channels; ++c)
            for (int64_t ki = 0; ki < s.kernel_h; ++ki)
              for (int64_t kj = 0; kj < s.kernel_w; ++kj) {
                int64_t yi = i * s.stride_h - s.pad_h + ki, xj = j * s.stride_w - s.pad_w + kj;
                if (yi < 0 || yi >= s.height || xj < 0 || xj >= s.width) continue;
                acc += double(x[((n * s.in_channels + c) * s.height + yi) * s.width + xj]) *
                       w[((o * s.in_channels + c) * s.kernel_h + ki) * s.kernel_w + kj];
              }
          y[((n * s.out_channels + o) * oh + i) * ow + j] = acc;
        }
  return y;
}

// Gradients of y = conv(x, w) + b for an output gradient g: dx, dw and db (double).
struct ConvGrads {
  std::vector<double> dx, dw, db;
};
inline ConvGrads ref_conv_grads(const ConvSpec& s, const float* x, const float* w,
                                const std::vector<double>& g) {
  const int64_t oh = s.out_height(), ow = s.out_width();
  ConvGrads r{std::vector<double>(s.batch * s.in_channels * s.height * s.width),
              std::vector<double>(s.out_channels * s.in_channels * s.kernel_h * s.kernel_w),
              std::vector<double>(s.out_channels)};
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t o = 0; o < s.out_channels; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const double gv = g[((n * s.out_channels + o) * oh + i) * ow + j];
          r.db[o] += gv;
          for (int64_t c = 0; c < s.in_channels; ++c)
            for (int64_t ki = 0; ki < s.kernel_h; ++ki)
              for (int64_t kj = 0; kj < s.kernel_w; ++kj) {
                int64_t yi = i * s.stride_h - s.pad_h + ki, xj = j * s.stride_w - s.pad_w + kj;
                if (yi < 0 || yi >= s.height || xj < 0 || xj >= s.width) continue;
                const int64_t xi = ((n * s.in_channels + c) * s.height + yi) * s.width + xj;
                const int64_t wi = ((o * s.in_channels + c) * s.kernel_h + ki) * s.kernel_w + kj;
                r.dx[xi] += gv * w[wi];
                r.dw[wi] += gv * x[xi];
              }
        }
  return r;
}

inline std::vector<double> ref_pool(const PoolSpec& s, const float* x) {
  const int64_t oh = s.out_height(), ow = s.out_width();
  std::vector<double> y(s.batch * s.channels * oh * ow);
  for (int64_t n = 0; n < s.batch * s.channels; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double best = -1e300, sum = 0;
        int64_t count = 0;
        for (int64_t ki = 0; ki < s.kernel_h; ++ki)
          for (int64_t kj = 0; kj < s.kernel_w; ++kj) {
            int64_t yi = i * s.stride_h - s.pad_h + ki, xj = j * s.stride_w - s.pad_w + kj;
            if (yi < 0 || yi >= s.height || xj < 0 || xj >= s.width) {
              ++count;  // padding counts for include-padding averages
              continue;
            }
            double v = x[(n * s.height + yi) * s.width + xj];
            best = std::max(best, v);
            sum += v;
            ++count;
          }
        y[(n * oh + i) * ow + j] = s.kind == PoolKind::max ? best : sum / count;
      }
  return y;
}

// GELU and its derivative at x, PyTorch's formulas: Φ(x) = ½(1 + erf(x/√2)), or its tanh form.
struct GeluRef {
  double y, dydx;
};
inline GeluRef ref_gelu(double x, GeluApproximation approximate) {
  if (approximate == GeluApproximation::tanh) {
    const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
    const double t = std::tanh(c * (x + k * x * x * x));
    return {0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * k * x * x)};
  }
  const double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
  return {x * cdf, cdf + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI)};
}

}  // namespace dtrain::test
