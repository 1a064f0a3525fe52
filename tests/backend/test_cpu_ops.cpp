// CPU backend ops against naive references (forward) and against their adjoint identities
// (backward): for a linear map y = A(x), <A(x), g> = <x, Aᵀ(g)> must hold.
#include <doctest/doctest.h>

#include <algorithm>  // copy, max
#include <cmath>
#include <cstring>  // memcmp: same bits
#include <vector>   // the wide-range inputs

#include "backend/backend.h"
#include "core/rng.h"
#include "reference_ops.h"

using namespace dtrain;

namespace {
Tensor random_tensor(const Shape& s, uint64_t stream) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = random_uniform(5, stream, i) - 0.5f;
  return t;
}
double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += double(a.data<float>()[i]) * b.data<float>()[i];
  return s;
}
std::unique_ptr<Backend> cpu() {
  return make_backend({DeviceChoice::cpu, 1, 0});
}
}  // namespace

TEST_CASE("linear forward matches x·wᵀ + b and backward is its adjoint") {
  auto be = cpu();
  LinearSpec s{7, 13, 5, true};
  auto op = be->make_linear(s);
  Tensor x = random_tensor({7, 13}, 1), w = random_tensor({5, 13}, 2), b = random_tensor({5}, 3);
  Tensor y = be->empty({7, 5});
  op->forward(x, w, b, y);
  for (int n = 0; n < 7; ++n)
    for (int o = 0; o < 5; ++o) {
      double acc = b.data<float>()[o];
      for (int i = 0; i < 13; ++i)
        acc += double(x.data<float>()[n * 13 + i]) * w.data<float>()[o * 13 + i];
      CHECK(y.data<float>()[n * 5 + o] == doctest::Approx(acc).epsilon(1e-5));
    }
  Tensor g = random_tensor({7, 5}, 4), dx = be->empty({7, 13}), dw = be->empty({5, 13}),
         db = be->empty({5});
  op->backward_data(Tensor(), g, w, dx);
  op->backward_weights(x, Tensor(), g, dw, db);
  // <x·wᵀ, g> = <x, g·w> = <w, gᵀ·x>
  Tensor y0 = be->empty({7, 5});
  Tensor nob;
  auto op0 = be->make_linear({7, 13, 5, false});
  op0->forward(x, w, nob, y0);
  CHECK(dot(y0, g) == doctest::Approx(dot(x, dx)).epsilon(1e-5));
  CHECK(dot(y0, g) == doctest::Approx(dot(w, dw)).epsilon(1e-5));
  for (int o = 0; o < 5; ++o) {
    double s = 0;
    for (int n = 0; n < 7; ++n) s += g.data<float>()[n * 5 + o];
    CHECK(db.data<float>()[o] == doctest::Approx(s).epsilon(1e-5));
  }
}

TEST_CASE("linear with a fused ReLU: clamped output, masked gradients") {
  auto be = cpu();
  auto fused = be->make_linear({6, 9, 8, true, true});
  auto plain = be->make_linear({6, 9, 8, true, false});
  Tensor x = random_tensor({6, 9}, 1), w = random_tensor({8, 9}, 2), b = random_tensor({8}, 3);
  Tensor y = be->empty({6, 8}), z = be->empty({6, 8});
  fused->forward(x, w, b, y);
  plain->forward(x, w, b, z);
  int positive = 0;
  for (int i = 0; i < 48; ++i) {
    const float v = z.data<float>()[i];
    CHECK(y.data<float>()[i] == doctest::Approx(v > 0 ? v : 0.0f).epsilon(1e-6));
    positive += v > 0;
  }
  CHECK(positive > 5);
  CHECK(positive < 43);
  // The fused op's gradients equal the plain op's for the masked output gradient.
  Tensor g = random_tensor({6, 8}, 4), gm = be->empty({6, 8});
  for (int i = 0; i < 48; ++i)
    gm.data<float>()[i] = y.data<float>()[i] > 0 ? g.data<float>()[i] : 0;
  Tensor dx = be->empty({6, 9}), dw = be->empty({8, 9}), db = be->empty({8});
  Tensor ex = be->empty({6, 9}), ew = be->empty({8, 9}), eb = be->empty({8});
  fused->backward_data(y, g, w, dx);
  fused->backward_weights(x, y, g, dw, db);
  plain->backward_data(Tensor(), gm, w, ex);
  plain->backward_weights(x, Tensor(), gm, ew, eb);
  for (int64_t i = 0; i < dx.numel(); ++i)
    CHECK(dx.data<float>()[i] == doctest::Approx(ex.data<float>()[i]).epsilon(1e-6));
  for (int64_t i = 0; i < dw.numel(); ++i)
    CHECK(dw.data<float>()[i] == doctest::Approx(ew.data<float>()[i]).epsilon(1e-6));
  for (int64_t i = 0; i < db.numel(); ++i)
    CHECK(db.data<float>()[i] == doctest::Approx(eb.data<float>()[i]).epsilon(1e-6));
}

TEST_CASE("pooling matches the reference, max backward routes to the argmax") {
  auto be = cpu();
  for (PoolSpec s : {PoolSpec{PoolKind::max, 2, 3, 8, 8, 2, 2, 2, 2, 0, 0},
                     PoolSpec{PoolKind::max, 1, 2, 7, 7, 3, 3, 2, 2, 0, 0, true},
                     PoolSpec{PoolKind::avg, 2, 3, 6, 6, 3, 3, 2, 2, 1, 1},
                     PoolSpec{PoolKind::avg, 2, 4, 5, 5, 5, 5, 1, 1, 0, 0}}) {
    auto op = be->make_pool(s);
    Tensor x = random_tensor(s.input_shape(), 7), y = be->empty(s.output_shape());
    Tensor ws = be->empty({static_cast<int64_t>(op->workspace_bytes())}, DType::u8);
    op->forward(x, y, ws, true);
    auto ref = test::ref_pool(s, x.data<float>());
    for (int64_t i = 0; i < y.numel(); ++i)
      CHECK(y.data<float>()[i] == doctest::Approx(ref[i]).epsilon(1e-5));
    Tensor dy = be->empty(s.output_shape()), dx = be->empty(s.input_shape());
    be->fill(dy, 1.0f);
    op->backward(x, y, dy, ws, dx);
    double total = 0;
    for (int64_t i = 0; i < dx.numel(); ++i) total += dx.data<float>()[i];
    if (s.kind == PoolKind::max) CHECK(total == doctest::Approx(double(y.numel())));
  }
  PoolSpec ceil{PoolKind::max, 1, 1, 32, 32, 3, 3, 2, 2, 0, 0, true};
  CHECK(ceil.out_height() == 16);  // Caffe cifar10_quick: 32 → 16 → 8 → 4
  PoolSpec floor{PoolKind::max, 1, 1, 32, 32, 3, 3, 2, 2, 0, 0, false};
  CHECK(floor.out_height() == 15);
}

TEST_CASE("2x2 max pooling: first maximum on ties, rows of any width") {
  auto be = cpu();
  // Widths below, at and above one vector of outputs, odd widths (last column dropped).
  for (int64_t width : {4, 10, 28, 33, 70}) {
    CAPTURE(width);
    PoolSpec s{PoolKind::max, 2, 3, 7, width, 2, 2, 2, 2, 0, 0};
    auto op = be->make_pool(s);
    // Few distinct values (as after a ReLU: many zeros) make ties common.
    Tensor x = be->empty(s.input_shape());
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = static_cast<float>(static_cast<int>(random_uniform(6, 1, i) * 3)) - 1;
    Tensor y = be->empty(s.output_shape()), dy = random_tensor(s.output_shape(), 2);
    Tensor dx = be->empty(s.input_shape());
    Tensor ws = be->empty({static_cast<int64_t>(op->workspace_bytes())}, DType::u8);
    op->forward(x, y, ws, true);
    op->backward(x, y, dy, ws, dx);
    const int64_t oh = s.out_height(), ow = s.out_width(), H = s.height, W = s.width;
    std::vector<float> expect(x.numel(), 0.0f);
    for (int64_t p = 0; p < s.batch * s.channels; ++p)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t best = p * H * W + 2 * i * W + 2 * j;  // scan order: the first maximum wins
          for (int64_t a = 0; a < 2; ++a)
            for (int64_t b = 0; b < 2; ++b) {
              const int64_t at = p * H * W + (2 * i + a) * W + 2 * j + b;
              if (x.data<float>()[at] > x.data<float>()[best]) best = at;
            }
          const int64_t o = (p * oh + i) * ow + j;
          REQUIRE(y.data<float>()[o] == x.data<float>()[best]);
          expect[best] += dy.data<float>()[o];
        }
    for (int64_t i = 0; i < dx.numel(); ++i) REQUIRE(dx.data<float>()[i] == expect[i]);
  }
}

TEST_CASE("relu forward and backward") {
  auto be = cpu();
  Tensor x = random_tensor({4, 10}, 9), y = be->empty({4, 10}), dy = random_tensor({4, 10}, 10);
  Tensor dx = be->empty({4, 10});
  auto op = be->make_relu({4, 10});
  op->forward(x, y);
  op->backward(x, y, dy, dx);
  for (int i = 0; i < 40; ++i) {
    float v = x.data<float>()[i];
    CHECK(y.data<float>()[i] == (v > 0 ? v : 0.0f));
    CHECK(dx.data<float>()[i] == (v > 0 ? dy.data<float>()[i] : 0.0f));
  }
}

TEST_CASE("gelu, exact and tanh forms, forward and backward against a double reference") {
  // oneDNN's erf and tanh are polynomial approximations in float: within a few float ulps of
  // the result (|y| up to 8 here), far below a wrong formula's error (tanh vs erf: 1e-3).
  auto be = cpu();
  const Shape shape{3, 5, 7, 11};
  Tensor x = random_tensor(shape, 21), dy = random_tensor(shape, 22);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] *= 16.0f;  // [-8, 8)
  // Exact zeros and the saturated tails as well.
  const float special[] = {0.0f, -0.0f, 1e-6f, -1e-6f, 12.0f, -12.0f, 40.0f, -40.0f};
  std::copy(std::begin(special), std::end(special), x.data<float>());
  for (const GeluApproximation form : {GeluApproximation::none, GeluApproximation::tanh}) {
    CAPTURE(static_cast<int>(form));
    auto op = be->make_gelu({shape, form});
    Tensor y = be->empty(shape), dx = be->empty(shape);
    op->forward(x, y);
    op->backward(x, dy, dx);
    double worst_y = 0, worst_dx = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const test::GeluRef r = test::ref_gelu(x.data<float>()[i], form);
      const double g = dy.data<float>()[i];
      worst_y = std::max(worst_y, std::fabs(y.data<float>()[i] - r.y) / (1 + std::fabs(r.y)));
      worst_dx = std::max(
          worst_dx, std::fabs(dx.data<float>()[i] - g * r.dydx) / (1 + std::fabs(g * r.dydx)));
    }
    MESSAGE("gelu max error: y " << worst_y << ", dx " << worst_dx);
    CHECK(worst_y <= 2e-6);
    CHECK(worst_dx <= 2e-6);
  }
}

TEST_CASE("gelu over a wide range: -10…10, tiny, huge, signed zeros and denormals") {
  // The same tolerance as above on every kind of input the kernels branch on (the saturated
  // tails, the clamp of the exponential, the masked row tail of an odd count). Huge inputs only
  // for the exact form: the tanh form's slope has x³ in it, and oneDNN's (the fallback without
  // AVX-512) is not finite there.
  std::vector<float> values;
  for (int i = -20000; i <= 20000; ++i) values.push_back(static_cast<float>(i) * 5e-4f);
  for (const float v : {0.0f, -0.0f, 1e-38f, -1e-38f, 1e-42f, -1e-42f, 1e-20f, -1e-20f, 1e-6f,
                        -1e-6f, 13.0f, -13.0f, 19.9f, -19.9f, 20.1f, -20.1f, 1e4f, -1e4f})
    values.push_back(v);
  const int64_t tanh_count = static_cast<int64_t>(values.size());
  for (const float v : {1e30f, -1e30f, 3e38f, -3e38f}) values.push_back(v);
  const int64_t n = static_cast<int64_t>(values.size());
  auto be = cpu();
  const Shape shape{n};
  Tensor x = be->empty(shape), dy = random_tensor(shape, 23);
  std::copy(values.begin(), values.end(), x.data<float>());
  for (const GeluApproximation form : {GeluApproximation::none, GeluApproximation::tanh}) {
    CAPTURE(static_cast<int>(form));
    auto op = be->make_gelu({shape, form});
    Tensor y = be->empty(shape), dx = be->empty(shape);
    op->forward(x, y);
    op->backward(x, dy, dx);
    double worst_y = 0, worst_dx = 0;
    for (int64_t i = 0; i < (form == GeluApproximation::tanh ? tanh_count : n); ++i) {
      const test::GeluRef r = test::ref_gelu(values[i], form);
      const double g = dy.data<float>()[i];
      CAPTURE(values[i]);
      REQUIRE(std::isfinite(y.data<float>()[i]));
      REQUIRE(std::isfinite(dx.data<float>()[i]));
      worst_y = std::max(worst_y, std::fabs(y.data<float>()[i] - r.y) / (1 + std::fabs(r.y)));
      worst_dx = std::max(
          worst_dx, std::fabs(dx.data<float>()[i] - g * r.dydx) / (1 + std::fabs(g * r.dydx)));
    }
    MESSAGE("gelu wide range max error: y " << worst_y << ", dx " << worst_dx);
    CHECK(worst_y <= 2e-6);
    CHECK(worst_dx <= 2e-6);
  }
}

TEST_CASE("gelu: the same bits on one thread and on a team") {
  // Several chunks and an odd tail: the team splits the work, each element's arithmetic is the
  // same.
  const Shape shape{100003};
  Tensor x = random_tensor(shape, 24), dy = random_tensor(shape, 25);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] *= 16.0f;
  for (const GeluApproximation form : {GeluApproximation::none, GeluApproximation::tanh}) {
    CAPTURE(static_cast<int>(form));
    std::vector<Tensor> ys, dxs;
    for (const int threads : {1, 2}) {
      auto be = make_backend({DeviceChoice::cpu, threads, 0});
      be->set_num_threads(threads);
      auto op = be->make_gelu({shape, form});
      ys.push_back(be->empty(shape));
      dxs.push_back(be->empty(shape));
      op->forward(x, ys.back());
      op->backward(x, dy, dxs.back());
    }
    CHECK(std::memcmp(ys[0].raw(), ys[1].raw(), ys[0].bytes()) == 0);
    CHECK(std::memcmp(dxs[0].raw(), dxs[1].raw(), dxs[0].bytes()) == 0);
  }
}

TEST_CASE("softmax cross-entropy: loss, correct count and gradient") {
  auto be = cpu();
  auto op = be->make_softmax_xent({3, 4});
  Tensor z = be->empty({3, 4}), labels = be->empty({3}, DType::i32);
  float zs[] = {1, 2, 3, 4, 0, 0, 0, 0, 100, -100, 0, 0};
  int32_t ls[] = {3, 1, 1};
  std::copy(zs, zs + 12, z.data<float>());
  std::copy(ls, ls + 3, labels.data<int32_t>());
  Tensor p = be->empty({3, 4}), stats = be->empty({2}), dz = be->empty({3, 4});
  op->forward(z, labels, p, stats);
  double l0 = std::log(std::exp(1.) + std::exp(2.) + std::exp(3.) + std::exp(4.)) - 4;
  double expect = l0 + std::log(4.0) + 200;  // third row: label logit −100, max 100
  CHECK(stats.data<float>()[0] == doctest::Approx(expect).epsilon(1e-5));
  CHECK(stats.data<float>()[1] == 1.0f);  // only row 0 is right (row 1 ties → index 0)
  op->backward(p, labels, dz, 0.5f);
  CHECK(dz.data<float>()[3] == doctest::Approx((p.data<float>()[3] - 1) * 0.5));
  CHECK(dz.data<float>()[0] == doctest::Approx(p.data<float>()[0] * 0.5));
}

TEST_CASE("batchnorm normalises with batch statistics and its backward is consistent") {
  auto be = cpu();
  BatchNormSpec s{4, 3, 2, 2, 1e-5f};
  auto op = be->make_batchnorm(s);
  Tensor x = random_tensor(s.shape(), 11), y = be->empty(s.shape());
  Tensor scale = be->empty({3}), shift = be->empty({3}), mean = be->empty({3}),
         var = be->empty({3});
  be->fill(scale, 2.0f);
  be->fill(shift, 0.5f);
  op->forward_training(x, scale, shift, y, mean, var, {});
  for (int c = 0; c < 3; ++c) {
    double s1 = 0, s2 = 0;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 4; ++i) {
        double v = y.data<float>()[(n * 3 + c) * 4 + i];
        s1 += v, s2 += v * v;
      }
    CHECK(s1 / 16 == doctest::Approx(0.5).epsilon(1e-4));
    CHECK(s2 / 16 - (s1 / 16) * (s1 / 16) == doctest::Approx(4.0).epsilon(1e-3));
  }
  Tensor dy = be->empty(s.shape()), dx = be->empty(s.shape()), ds = be->empty({3}),
         dsh = be->empty({3});
  be->fill(dy, 1.0f);
  op->backward(x, y, dy, scale, mean, var, {}, dx, ds, dsh);
  // A constant upstream gradient only moves the shift: dx = 0, dshift = count.
  for (int64_t i = 0; i < dx.numel(); ++i) CHECK(std::abs(dx.data<float>()[i]) < 1e-4);
  CHECK(dsh.data<float>()[0] == doctest::Approx(16));
}

TEST_CASE("dropout mask is deterministic and scales kept values") {
  auto be = cpu();
  auto op = be->make_dropout({Shape{1000}});
  Tensor x = be->empty({1000}), y1 = be->empty({1000}), y2 = be->empty({1000});
  Tensor m = be->empty({1000}, DType::u8);
  be->fill(x, 1.0f);
  op->forward(x, y1, m, 0.25f, 3, 4);
  op->forward(x, y2, m, 0.25f, 3, 4);
  int kept = 0;
  for (int i = 0; i < 1000; ++i) {
    CHECK(y1.data<float>()[i] == y2.data<float>()[i]);
    if (y1.data<float>()[i] != 0) {
      ++kept;
      CHECK(y1.data<float>()[i] == doctest::Approx(1 / 0.75));
    }
  }
  CHECK(kept > 700);
  CHECK(kept < 800);
}
