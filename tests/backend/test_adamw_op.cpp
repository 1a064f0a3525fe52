// Backend::adamw_step on the CPU against torch.optim.AdamW's formula evaluated in double.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "backend/backend.h"

using namespace dtrain;

namespace {

// One AdamW step of one element in double: w, m, v in place.
void reference_step(double& w, double g, double& m, double& v, const AdamWHyper& h) {
  w *= 1.0 - static_cast<double>(h.lr) * h.weight_decay;
  m = h.beta1 * m + (1.0 - h.beta1) * g;
  v = h.beta2 * v + (1.0 - h.beta2) * g * g;
  const double bias1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step));
  const double bias2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step));
  w -= h.lr / bias1 * m / (std::sqrt(v) / std::sqrt(bias2) + h.eps);
}

}  // namespace

TEST_CASE("adamw_step follows torch.optim.AdamW's formula over several steps") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = 100003;  // above the threading threshold, not a multiple of a vector
  Tensor w = be->empty({n}), g = be->empty({n}), m = be->zeros({n}), v = be->zeros({n});
  std::vector<double> rw(n), rm(n, 0.0), rv(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    w.data<float>()[i] = 0.5f - 0.001f * static_cast<float>(i % 1000);
    rw[i] = w.data<float>()[i];
  }
  for (float wd : {0.0f, 0.1f}) {
    CAPTURE(wd);
    for (int64_t step = 1; step <= 5; ++step) {
      CAPTURE(step);
      for (int64_t i = 0; i < n; ++i)
        g.data<float>()[i] = 0.01f * static_cast<float>((i * 7 + step * 3) % 23) - 0.1f;
      const AdamWHyper h{1e-2f, 0.9f, 0.999f, 1e-8f, wd, step};
      be->adamw_step(w, g, m, v, h);
      for (int64_t i = 0; i < n; ++i) reference_step(rw[i], g.data<float>()[i], rm[i], rv[i], h);
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        worst = std::max(worst, std::abs(w.data<float>()[i] - rw[i]));
        worst = std::max(worst, std::abs(m.data<float>()[i] - rm[i]));
        worst = std::max(worst, std::abs(v.data<float>()[i] - rv[i]) / (rv[i] + 1e-12));
      }
      CHECK(worst < 1e-5);
    }
    // The next pass starts its moments and step count again from w's current values.
    be->fill(m, 0.0f);
    be->fill(v, 0.0f);
    std::fill(rm.begin(), rm.end(), 0.0);
    std::fill(rv.begin(), rv.end(), 0.0);
  }
}

TEST_CASE("adamw_step's first step moves each weight by lr against the gradient's sign") {
  // t = 1: m̂ = g, v̂ = g², so the step is lr·g/(|g| + ε) ≈ lr·sign(g) (no decay).
  auto be = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor w = be->zeros({3}), g = be->empty({3}), m = be->zeros({3}), v = be->zeros({3});
  g.data<float>()[0] = 4.0f, g.data<float>()[1] = -0.001f, g.data<float>()[2] = 0.0f;
  be->adamw_step(w, g, m, v, AdamWHyper{0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 1});
  CHECK(w.data<float>()[0] == doctest::Approx(-0.1));
  CHECK(w.data<float>()[1] == doctest::Approx(0.1).epsilon(1e-4));
  CHECK(w.data<float>()[2] == 0.0f);  // no gradient, no decay: unchanged
  CHECK(g.data<float>()[0] == 4.0f);  // gradients unchanged
  // Decoupled decay alone: w·(1 − lr·wd) with a zero gradient.
  Tensor w2 = be->empty({1}), g2 = be->zeros({1}), m2 = be->zeros({1}), v2 = be->zeros({1});
  w2.data<float>()[0] = 2.0f;
  be->adamw_step(w2, g2, m2, v2, AdamWHyper{0.1f, 0.9f, 0.999f, 1e-8f, 0.5f, 1});
  CHECK(w2.data<float>()[0] == doctest::Approx(2.0 * (1 - 0.05)));
}
