#include <doctest/doctest.h>

#include <algorithm>  // max
#include <cstring>    // memcmp

#include "backend/backend.h"

using namespace dtrain;

TEST_CASE("sgd_step follows PyTorch's SGD formulas") {
  auto be = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor w = be->empty({2}), g = be->empty({2}), v = be->zeros({2});
  w.data<float>()[0] = 1.0f, w.data<float>()[1] = -2.0f;
  g.data<float>()[0] = 0.5f, g.data<float>()[1] = 0.25f;
  SgdHyper h{0.1f, 0.9f, 0.0f, 0.01f, false};
  be->sgd_step(w, g, v, h);
  // g' = g + wd·w = 0.51; v = 0.51; w = 1 − 0.1·0.51
  CHECK(v.data<float>()[0] == doctest::Approx(0.51));
  CHECK(w.data<float>()[0] == doctest::Approx(0.949));
  be->sgd_step(w, g, v, h);
  // g' = 0.5 + 0.01·0.949 = 0.50949; v = 0.9·0.51 + 0.50949 = 0.96849; w = 0.949 − 0.096849
  CHECK(v.data<float>()[0] == doctest::Approx(0.96849));
  CHECK(w.data<float>()[0] == doctest::Approx(0.852151));
  // Nesterov: step = g' + μ·v
  Tensor wn = be->empty({1}), gn = be->empty({1}), vn = be->zeros({1});
  wn.data<float>()[0] = 1.0f, gn.data<float>()[0] = 1.0f;
  be->sgd_step(wn, gn, vn, SgdHyper{0.1f, 0.9f, 0.0f, 0.0f, true});
  CHECK(wn.data<float>()[0] == doctest::Approx(1 - 0.1 * (1 + 0.9)));
  // Plain SGD needs no momentum buffer.
  Tensor none;
  be->sgd_step(wn, gn, none, SgdHyper{0.5f});
  CHECK(wn.data<float>()[0] == doctest::Approx(0.81 - 0.5));
}

TEST_CASE("sgd_step_accumulate steps with ĝ = g + wd·w and keeps ĝ (or adds it)") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = 200000;  // above the threading threshold
  Tensor w = be->empty({n}), g = be->empty({n}), a = be->empty({n});
  for (int64_t i = 0; i < n; ++i) {
    w.data<float>()[i] = 1.0f + 0.001f * static_cast<float>(i % 7);
    g.data<float>()[i] = 0.5f - 0.01f * static_cast<float>(i % 5);
    a.data<float>()[i] = 3.0f;
  }
  for (float wd : {0.0f, 0.01f}) {
    for (bool add : {false, true}) {
      CAPTURE(wd);
      CAPTURE(add);
      Tensor w2 = be->empty({n}), a2 = be->empty({n});
      be->copy(w2, w);
      be->copy(a2, a);
      be->sgd_step_accumulate(w2, g, a2, 0.1f, wd, add);
      for (int64_t i : {int64_t{0}, int64_t{3}, n - 1}) {
        const float gi = g.data<float>()[i] + wd * w.data<float>()[i];
        CHECK(a2.data<float>()[i] == (add ? a.data<float>()[i] + gi : gi));
        CHECK(w2.data<float>()[i] == w.data<float>()[i] - 0.1f * gi);
      }
    }
  }
  CHECK(g.data<float>()[3] == 0.5f - 0.01f * 3);  // gradients unchanged
}

TEST_CASE("axpy, axpby, scale, add, fill, copy_rows") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = 200000;  // above the threading threshold
  Tensor x = be->empty({n}), y = be->empty({n}), z = be->empty({n});
  be->fill(x, 2.0f);
  be->fill(y, 3.0f);
  be->axpy(0.5f, x, y);         // 4
  be->axpby(1.0f, x, 2.0f, y);  // 10
  be->scale(y, 0.1f);           // 1
  be->add(x, y, z);             // 3
  CHECK(y.data<float>()[n - 1] == doctest::Approx(1.0));
  CHECK(z.data<float>()[12345] == doctest::Approx(3.0));
  Tensor a = be->zeros({3, 4}), b = be->empty({3, 2});
  be->fill(b, 7.0f);
  be->copy_rows(a.slice(1, {11}), 4, b, 2, 3, 2);
  CHECK(a.data<float>()[0] == 0.0f);
  CHECK(a.data<float>()[1] == 7.0f);
  CHECK(a.data<float>()[2] == 7.0f);
  CHECK(a.data<float>()[3] == 0.0f);
  CHECK(a.data<float>()[9] == 7.0f);
}

TEST_CASE("add_relu: max(a + b, 0), in place too; the base class's two passes agree") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = 200003;  // above the threading threshold, odd
  Tensor a = be->empty({n}), b = be->empty({n}), out = be->empty({n});
  for (int64_t i = 0; i < n; ++i) {
    a.data<float>()[i] = static_cast<float>(i % 11) - 5.0f;
    b.data<float>()[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  }
  be->add_relu(a, b, out);
  int wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += out.data<float>()[i] != std::max(a.data<float>()[i] + b.data<float>()[i], 0.0f);
  CHECK(wrong == 0);
  CHECK(out.data<float>()[0] == 0.0f);    // −5.5
  CHECK(out.data<float>()[10] == 5.25f);  // 5 + 0.25
  be->Backend::add_relu(a, b, a);         // the default (add, then a ReLU op), in place
  CHECK(std::memcmp(a.data<float>(), out.data<float>(), n * sizeof(float)) == 0);
}

TEST_CASE("sgd_predict writes what sgd_step would, bit for bit, and changes nothing else") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = 200001;  // above the threading threshold, odd
  Tensor w = be->empty({n}), g = be->empty({n}), v = be->empty({n});
  for (int64_t i = 0; i < n; ++i) {
    w.data<float>()[i] = 1.0f + 0.001f * static_cast<float>(i % 7);
    g.data<float>()[i] = 0.5f - 0.01f * static_cast<float>(i % 5);
    v.data<float>()[i] = 0.1f * static_cast<float>(i % 3);
  }
  for (const SgdHyper& h :
       {SgdHyper{0.1f}, SgdHyper{0.1f, 0.0f, 0.0f, 0.01f}, SgdHyper{0.1f, 0.9f, 0.0f, 5e-5f},
        SgdHyper{0.1f, 0.9f, 0.1f, 0.01f}, SgdHyper{0.1f, 0.9f, 0.0f, 0.01f, true}}) {
    CAPTURE(h.momentum);
    CAPTURE(h.nesterov);
    Tensor out = be->empty({n}), w2 = be->empty({n}), v2 = be->empty({n});
    be->copy(w2, w);
    be->copy(v2, v);
    be->sgd_predict(out, w, g, h.momentum != 0 ? v : Tensor(), h);
    be->sgd_step(w2, g, h.momentum != 0 ? v2 : Tensor(), h);
    int differing = 0;
    for (int64_t i = 0; i < n; ++i) differing += out.data<float>()[i] != w2.data<float>()[i];
    CHECK(differing == 0);
    CHECK(w.data<float>()[5] == 1.0f + 0.001f * 5);  // weights and momentum unchanged
    CHECK(v.data<float>()[5] == 0.1f * 2);
  }
}

namespace {
// The fused passes' tests: above the threading threshold, not a multiple of dot's lanes.
constexpr int64_t kFusedSize = 200003;

// a + b·(i mod `mod`) at element i.
Tensor filled_tensor(Backend& be, int64_t n, float a, float b, int mod) {
  Tensor t = be.empty({n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = a + b * static_cast<float>(i % mod);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b, int64_t n) {
  return std::memcmp(a.raw(), b.raw(), static_cast<size_t>(n) * 4) == 0;
}
}  // namespace

TEST_CASE("SAPipe's fused passes: sgd_step_delta, axpby_dot, scale_copy equal their parts") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = kFusedSize;
  auto filled = [&](float a, float b, int mod) { return filled_tensor(*be, n, a, b, mod); };
  auto same = [&](const Tensor& a, const Tensor& b) { return same_bits(a, b, n); };
  const Tensor g = filled(0.5f, -0.01f, 5);
  for (const SgdHyper& h : {SgdHyper{0.1f}, SgdHyper{0.1f, 0.9f, 0.0f, 5e-5f},
                            SgdHyper{0.1f, 0.9f, 0.0f, 0.01f, true}}) {
    CAPTURE(h.momentum);
    const Tensor w = filled(1.0f, 0.001f, 7), v = filled(0.0f, 0.1f, 3);
    const Tensor w2 = filled(1.0f, 0.001f, 7), v2 = filled(0.0f, 0.1f, 3), delta = be->empty({n});
    be->sgd_step(w, g, h.momentum != 0 ? v : Tensor(), h);
    be->sgd_step_delta(w2, g, h.momentum != 0 ? v2 : Tensor(), delta, h);
    CHECK(same(w, w2));
    CHECK(same(v, v2));
    int differing = 0;  // new − old, exactly
    for (int64_t i = 0; i < n; ++i)
      differing += delta.data<float>()[i] !=
                   w.data<float>()[i] - (1.0f + 0.001f * static_cast<float>(i % 7));
    CHECK(differing == 0);
  }
  const Tensor x = filled(0.3f, 0.02f, 11), z = filled(-0.2f, 0.03f, 13);
  const Tensor y = filled(0.7f, -0.05f, 9), y2 = filled(0.7f, -0.05f, 9);
  be->axpby(-0.5f, x, 1.0f, y);
  const double expected = be->dot(y, z);
  CHECK(be->axpby_dot(-0.5f, x, 1.0f, y2, z) == expected);
  CHECK(same(y, y2));
  const Tensor scaled = be->empty({n});
  be->scale_copy(scaled, x, 2.0f);
  int differing = 0;
  for (int64_t i = 0; i < n; ++i) differing += scaled.data<float>()[i] != 2.0f * x.data<float>()[i];
  CHECK(differing == 0);
}

TEST_CASE(
    "SAPipe's wp3 passes: step_dot and predict_sum equal the base class's parts, bit for bit") {
  // The CPU's one-pass kernels against Backend's composition of the simpler ops (which is what
  // a backend without them runs): the weights, the optimizer state, g + α·other, the sum
  // Σ (g + α·other)·Δ and the prediction with α·x + β·y, all the same bits.
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = kFusedSize;
  auto filled = [&](float a, float b, int mod) { return filled_tensor(*be, n, a, b, mod); };
  auto same = [&](const Tensor& a, const Tensor& b) { return same_bits(a, b, n); };
  const Tensor other = filled(0.3f, 0.02f, 11), x = filled(-0.2f, 0.03f, 13);
  const Tensor scratch = be->empty({n});
  for (const SgdHyper& h : {SgdHyper{0.1f}, SgdHyper{0.1f, 0.9f, 0.0f, 5e-5f},
                            SgdHyper{0.1f, 0.9f, 0.0f, 0.01f, true}}) {
    CAPTURE(h.momentum);
    CAPTURE(h.nesterov);
    const Tensor no_v;
    const Tensor w = filled(1.0f, 0.001f, 7), v = filled(0.0f, 0.1f, 3),
                 g = filled(0.5f, -0.01f, 5);
    const Tensor w2 = filled(1.0f, 0.001f, 7), v2 = filled(0.0f, 0.1f, 3),
                 g2 = filled(0.5f, -0.01f, 5);
    const double fused =
        be->sgd_step_dot(w, g, h.momentum != 0 ? v : no_v, -0.5f, other, scratch, h);
    const double parts =
        be->Backend::sgd_step_dot(w2, g2, h.momentum != 0 ? v2 : no_v, -0.5f, other, scratch, h);
    CHECK(fused == parts);
    CHECK(fused != 0.0);
    CHECK(same(w, w2));
    CHECK(same(v, v2));
    CHECK(same(g, g2));
    const Tensor out = be->empty({n}), out2 = be->empty({n});
    be->sgd_predict_sum(out, w, GradientSum{0.25f, x, 1.5f, g}, h.momentum != 0 ? v : no_v, h);
    be->Backend::sgd_predict_sum(out2, w, GradientSum{0.25f, x, 1.5f, g2},
                                 h.momentum != 0 ? v : no_v, h);
    CHECK(same(out, out2));
  }
  for (float beta1 : {0.9f, 0.3f}) {  // both lerp forms
    CAPTURE(beta1);
    const AdamWHyper h{1e-3f, beta1, 0.98f, 1e-8f, 0.1f, 3};
    const Tensor w = filled(1.0f, 0.001f, 7), m = filled(0.01f, 0.001f, 3),
                 v = filled(0.001f, 0.0001f, 4), g = filled(0.5f, -0.01f, 5);
    const Tensor w2 = filled(1.0f, 0.001f, 7), m2 = filled(0.01f, 0.001f, 3),
                 v2 = filled(0.001f, 0.0001f, 4), g2 = filled(0.5f, -0.01f, 5);
    const double fused = be->adamw_step_dot(w, g, m, v, -0.5f, other, scratch, h);
    const double parts = be->Backend::adamw_step_dot(w2, g2, m2, v2, -0.5f, other, scratch, h);
    CHECK(fused == parts);
    CHECK(fused != 0.0);
    CHECK(same(w, w2));
    CHECK(same(m, m2));
    CHECK(same(v, v2));
    CHECK(same(g, g2));
    const Tensor out = be->empty({n}), out2 = be->empty({n});
    const AdamWHyper next{1e-3f, beta1, 0.98f, 1e-8f, 0.1f, 4};
    be->adamw_predict_sum(out, w, GradientSum{0.25f, x, 1.5f, g}, m, v, next);
    be->Backend::adamw_predict_sum(out2, w, GradientSum{0.25f, x, 1.5f, g2}, m, v, next);
    CHECK(same(out, out2));
  }
}

TEST_CASE("dot sums in double in a fixed order; dc_diagonal adds λ·g⊙g⊙Δ") {
  auto be = make_backend({DeviceChoice::cpu, 1, 0});
  for (int64_t n : {1, 7, 8, 9, 1000}) {
    CAPTURE(n);
    Tensor a = be->empty({n}), b = be->empty({n});
    double expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      a.data<float>()[i] = 0.25f * static_cast<float>(i % 9) - 1.0f;
      b.data<float>()[i] = 0.5f + 0.125f * static_cast<float>(i % 4);
      expected += static_cast<double>(a.data<float>()[i]) * b.data<float>()[i];
    }
    CHECK(be->dot(a, b) == doctest::Approx(expected).epsilon(1e-12));
    CHECK(be->dot(a, b) == be->dot(a, b));
  }
  Tensor g = be->empty({3}), d = be->empty({3});
  const float gs[] = {0.5f, -2.0f, 3.0f}, ds[] = {1.0f, 0.25f, -0.5f};
  for (int i = 0; i < 3; ++i) g.data<float>()[i] = gs[i], d.data<float>()[i] = ds[i];
  be->dc_diagonal(g, d, 0.2f);
  for (int i = 0; i < 3; ++i) CHECK(g.data<float>()[i] == gs[i] + 0.2f * gs[i] * gs[i] * ds[i]);
}

TEST_CASE("sgd_step_predict is sgd_step then sgd_predict, bit for bit") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = 200003;
  Tensor w = be->empty({n}), g = be->empty({n}), v = be->empty({n}), p = be->empty({n});
  for (int64_t i = 0; i < n; ++i) {
    w.data<float>()[i] = 1.0f + 0.001f * static_cast<float>(i % 7);
    g.data<float>()[i] = 0.5f - 0.01f * static_cast<float>(i % 5);
    v.data<float>()[i] = 0.1f * static_cast<float>(i % 3);
    p.data<float>()[i] = -0.25f + 0.02f * static_cast<float>(i % 11);
  }
  for (const SgdHyper& h :
       {SgdHyper{0.1f}, SgdHyper{0.1f, 0.0f, 0.0f, 0.01f}, SgdHyper{0.1f, 0.9f, 0.0f, 5e-5f},
        SgdHyper{0.1f, 0.9f, 0.1f, 0.01f}, SgdHyper{0.1f, 0.9f, 0.0f, 0.01f, true}}) {
    for (bool same : {false, true}) {  // ĝ another buffer, or the gradient itself (wp2)
      CAPTURE(h.momentum);
      CAPTURE(h.nesterov);
      CAPTURE(same);
      const Tensor& ghat = same ? g : p;
      Tensor w1 = be->empty({n}), v1 = be->empty({n}), w2 = be->empty({n}), v2 = be->empty({n});
      Tensor out1 = be->empty({n}), out2 = be->empty({n});
      for (Tensor* t : {&w1, &w2}) be->copy(*t, w);
      for (Tensor* t : {&v1, &v2}) be->copy(*t, v);
      const bool mom = h.momentum != 0;
      be->sgd_step(w1, g, mom ? v1 : Tensor(), h);
      be->sgd_predict(out1, w1, ghat, mom ? v1 : Tensor(), h);
      be->sgd_step_predict(w2, g, mom ? v2 : Tensor(), ghat, out2, h);
      CHECK(std::memcmp(w1.raw(), w2.raw(), w1.bytes()) == 0);
      CHECK(std::memcmp(out1.raw(), out2.raw(), out1.bytes()) == 0);
      if (mom) CHECK(std::memcmp(v1.raw(), v2.raw(), v1.bytes()) == 0);
    }
  }
}
