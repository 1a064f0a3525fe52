#include <doctest/doctest.h>

#include <algorithm>  // max
#include <cstring>    // memcmp

#include "backend/backend.h"

using namespace dtrain;

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

namespace {
// The fused ops' tests: above the threading threshold, not a multiple of dot's lanes.
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

TEST_CASE("SAPipe's fused passes: axpby_dot and scale_copy equal their parts") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = kFusedSize;
  auto filled = [&](float a, float b, int mod) { return filled_tensor(*be, n, a, b, mod); };
  auto same = [&](const Tensor& a, const Tensor& b) { return same_bits(a, b, n); };
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
