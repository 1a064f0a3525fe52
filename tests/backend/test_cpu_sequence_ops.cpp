// The CPU backend's sequence-model ops other than attention (rows of a position table,
// embedding, layer norm) against plain double-precision references, finite differences, and
// their determinism across calls and thread counts.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "sequence_test_util.h"

using namespace dtrain;
using dtrain::test::cpu_backend;
using dtrain::test::random_tensor;
using dtrain::test::same_bits;

TEST_CASE("add_to_rows adds the row to every row, sum_rows sums the rows in a fixed order") {
  for (int threads : {1, 2})
    for (auto [rows, width] : {std::pair<int64_t, int64_t>{1, 5}, {3, 17}, {9, 1000}, {300, 300}}) {
      auto be = cpu_backend(threads);
      Tensor y = random_tensor({rows, width}, 1), row = random_tensor({width}, 2);
      std::vector<float> before(y.data<float>(), y.data<float>() + y.numel());
      be->add_to_rows(y, row);
      for (int64_t i = 0; i < y.numel(); ++i)
        REQUIRE(y.data<float>()[i] == before[i] + row.data<float>()[i % width]);
      Tensor sum = be->empty({width});
      be->sum_rows(y, sum);
      for (int64_t c = 0; c < width; ++c) {
        double s = 0;
        for (int64_t r = 0; r < rows; ++r) s += y.data<float>()[r * width + c];
        REQUIRE(sum.data<float>()[c] == doctest::Approx(s).epsilon(1e-5));
      }
      Tensor again = be->empty({width}), one_thread = be->empty({width});
      be->sum_rows(y, again);
      CHECK(same_bits(sum, again));
      cpu_backend(1)->sum_rows(y, one_thread);
      CHECK(same_bits(sum, one_thread));
    }
}

namespace {
Tensor ids_tensor(int64_t rows, int64_t vocab, uint64_t stream) {
  Tensor ids = Tensor::empty({rows});
  // Few distinct ids, so that several rows share one (the scatter-add's collisions).
  for (int64_t r = 0; r < rows; ++r)
    ids.data<float>()[r] = static_cast<float>(
        static_cast<int64_t>(random_uniform(3, stream, r) * static_cast<float>(vocab)) % vocab);
  return ids;
}
}  // namespace

TEST_CASE("embedding gathers rows and scatter-adds gradients, with and without accumulate") {
  for (int threads : {1, 2})
    for (auto [rows, vocab, dim] : {std::tuple<int64_t, int64_t, int64_t>{1, 3, 1},
                                    {7, 5, 3},
                                    {64, 11, 70},
                                    {500, 65, 130}}) {
      CAPTURE(rows);
      CAPTURE(vocab);
      CAPTURE(dim);
      CAPTURE(threads);
      auto be = cpu_backend(threads);
      auto op = be->make_embedding({rows, vocab, dim});
      Tensor ids = ids_tensor(rows, vocab, rows), table = random_tensor({vocab, dim}, 1);
      Tensor y = be->empty({rows, dim});
      op->forward(ids, table, y);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < dim; ++c)
          REQUIRE(y.data<float>()[r * dim + c] ==
                  table.data<float>()[static_cast<int64_t>(ids.data<float>()[r]) * dim + c]);

      Tensor dy = random_tensor({rows, dim}, 2);
      std::vector<double> ref(vocab * dim, 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < dim; ++c)
          ref[static_cast<int64_t>(ids.data<float>()[r]) * dim + c] +=
              dy.data<float>()[r * dim + c];
      Tensor dtable = random_tensor({vocab, dim}, 3);  // overwritten without accumulate
      op->backward(ids, dy, dtable, false);
      for (int64_t i = 0; i < vocab * dim; ++i)
        REQUIRE(dtable.data<float>()[i] == doctest::Approx(ref[i]).epsilon(1e-5));

      Tensor prior = random_tensor({vocab, dim}, 4), acc = be->empty({vocab, dim});
      be->copy(acc, prior);
      op->backward(ids, dy, acc, true);
      for (int64_t i = 0; i < vocab * dim; ++i)
        REQUIRE(acc.data<float>()[i] ==
                doctest::Approx(ref[i] + prior.data<float>()[i]).epsilon(1e-5));

      Tensor again = be->empty({vocab, dim}), one_thread = be->empty({vocab, dim});
      op->backward(ids, dy, again, false);
      CHECK(same_bits(dtable, again));
      cpu_backend(1)->make_embedding({rows, vocab, dim})->backward(ids, dy, one_thread, false);
      CHECK(same_bits(dtable, one_thread));
    }
}

TEST_CASE("embedding takes a smaller batch than its spec and refuses an id outside the table") {
  auto be = cpu_backend(1);
  auto op = be->make_embedding({8, 4, 2});
  Tensor ids = Tensor::empty({3}), table = random_tensor({4, 2}, 1), y = be->empty({3, 2});
  ids.data<float>()[0] = 3, ids.data<float>()[1] = 0, ids.data<float>()[2] = 3;
  op->forward(ids, table, y);
  CHECK(y.data<float>()[4] == table.data<float>()[6]);
  ids.data<float>()[1] = 4;
  CHECK_THROWS_WITH(op->forward(ids, table, y), doctest::Contains("not a row"));
  ids.data<float>()[1] = -1;
  CHECK_THROWS(op->forward(ids, table, y));
}

namespace {
struct LayerNormRef {
  std::vector<double> y, dx, dgamma, dbeta;
};
LayerNormRef ref_layer_norm(const LayerNormSpec& s, const float* x, const float* gamma,
                            const float* beta, const float* dy) {
  const int64_t F = s.features;
  LayerNormRef r{std::vector<double>(s.rows * F), std::vector<double>(s.rows * F),
                 std::vector<double>(F), std::vector<double>(F)};
  for (int64_t n = 0; n < s.rows; ++n) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < F; ++c) mean += x[n * F + c];
    mean /= F;
    for (int64_t c = 0; c < F; ++c) var += (x[n * F + c] - mean) * (x[n * F + c] - mean);
    const double rstd = 1 / std::sqrt(var / F + s.epsilon);
    double mean_g = 0, mean_gx = 0;
    for (int64_t c = 0; c < F; ++c) {
      const double xhat = (x[n * F + c] - mean) * rstd;
      r.y[n * F + c] = xhat * gamma[c] + (beta ? beta[c] : 0.0);
      mean_g += double(dy[n * F + c]) * gamma[c] / F;
      mean_gx += double(dy[n * F + c]) * gamma[c] * xhat / F;
      r.dgamma[c] += dy[n * F + c] * xhat;
      r.dbeta[c] += dy[n * F + c];
    }
    for (int64_t c = 0; c < F; ++c) {
      const double xhat = (x[n * F + c] - mean) * rstd;
      r.dx[n * F + c] = rstd * (double(dy[n * F + c]) * gamma[c] - mean_g - xhat * mean_gx);
    }
  }
  return r;
}
}  // namespace

TEST_CASE("layer norm matches the double reference forward and backward, deterministically") {
  for (int threads : {1, 2})
    for (bool bias : {true, false})
      for (auto [rows, features] :
           {std::pair<int64_t, int64_t>{1, 1}, {1, 7}, {5, 16}, {33, 45}, {130, 384}}) {
        CAPTURE(rows);
        CAPTURE(features);
        CAPTURE(bias);
        CAPTURE(threads);
        auto be = cpu_backend(threads);
        LayerNormSpec s{rows, features, 1e-5f, bias};
        auto op = be->make_layer_norm(s);
        Tensor x = random_tensor({rows, features}, 1, 4.0f);
        // An offset: the variance of shifted values tests the centring.
        for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] += 3.0f;
        Tensor gamma = random_tensor({features}, 2), beta = random_tensor({features}, 3);
        Tensor dy = random_tensor({rows, features}, 4);
        Tensor y = be->empty({rows, features}), mean = be->empty({rows}), rstd = be->empty({rows});
        op->forward(x, gamma, bias ? beta : Tensor(), y, mean, rstd);
        auto ref = ref_layer_norm(s, x.data<float>(), gamma.data<float>(),
                                  bias ? beta.data<float>() : nullptr, dy.data<float>());
        for (int64_t i = 0; i < y.numel(); ++i)
          REQUIRE(y.data<float>()[i] == doctest::Approx(ref.y[i]).epsilon(1e-5).scale(1));
        Tensor dx = be->empty({rows, features}), dgamma = be->empty({features}),
               dbeta = be->empty({features});
        op->backward(x, dy, gamma, mean, rstd, dx, dgamma, bias ? dbeta : Tensor());
        for (int64_t i = 0; i < dx.numel(); ++i)
          REQUIRE(dx.data<float>()[i] == doctest::Approx(ref.dx[i]).epsilon(1e-4).scale(0.1));
        for (int64_t c = 0; c < features; ++c) {
          REQUIRE(dgamma.data<float>()[c] ==
                  doctest::Approx(ref.dgamma[c]).epsilon(1e-4).scale(0.1));
          if (bias)
            REQUIRE(dbeta.data<float>()[c] ==
                    doctest::Approx(ref.dbeta[c]).epsilon(1e-4).scale(0.1));
        }
        // The same bits on a second call and with one thread.
        Tensor dx2 = be->empty({rows, features}), dgamma2 = be->empty({features}),
               dbeta2 = be->empty({features});
        cpu_backend(1)->make_layer_norm(s)->backward(x, dy, gamma, mean, rstd, dx2, dgamma2,
                                                     bias ? dbeta2 : Tensor());
        CHECK(same_bits(dx, dx2));
        CHECK(same_bits(dgamma, dgamma2));
        if (bias) CHECK(same_bits(dbeta, dbeta2));
      }
}

TEST_CASE("layer norm's backward agrees with finite differences of its forward") {
  auto be = cpu_backend(1);
  const int64_t rows = 3, features = 6;
  LayerNormSpec s{rows, features, 1e-5f, true};
  auto op = be->make_layer_norm(s);
  Tensor x = random_tensor({rows, features}, 11, 2.0f), gamma = random_tensor({features}, 12),
         beta = random_tensor({features}, 13), dy = random_tensor({rows, features}, 14);
  Tensor y = be->empty({rows, features}), mean = be->empty({rows}), rstd = be->empty({rows});
  // loss = <y, dy>, in double over the float forward.
  auto loss = [&] {
    op->forward(x, gamma, beta, y, mean, rstd);
    double l = 0;
    for (int64_t i = 0; i < y.numel(); ++i) l += double(y.data<float>()[i]) * dy.data<float>()[i];
    return l;
  };
  loss();
  Tensor dx = be->empty({rows, features}), dgamma = be->empty({features}),
         dbeta = be->empty({features});
  op->backward(x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
  const float h = 1e-2f;
  auto numeric = [&](float& v) {
    const float saved = v;
    v = saved + h;
    const double plus = loss();
    v = saved - h;
    const double minus = loss();
    v = saved;
    return (plus - minus) / (2 * h);
  };
  for (int64_t i = 0; i < x.numel(); ++i)
    CHECK(dx.data<float>()[i] ==
          doctest::Approx(numeric(x.data<float>()[i])).epsilon(2e-2).scale(1e-2));
  for (int64_t c = 0; c < features; ++c) {
    CHECK(dgamma.data<float>()[c] ==
          doctest::Approx(numeric(gamma.data<float>()[c])).epsilon(1e-2).scale(1e-2));
    CHECK(dbeta.data<float>()[c] ==
          doctest::Approx(numeric(beta.data<float>()[c])).epsilon(1e-2).scale(1e-2));
  }
}
