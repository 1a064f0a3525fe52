// The CPU causal attention against a plain double-precision reference (forward and backward,
// with and without dropout), finite differences, causality, and its determinism across calls
// and thread counts.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "sequence_test_util.h"

using namespace dtrain;
using dtrain::test::cpu_backend;
using dtrain::test::random_tensor;
using dtrain::test::same_bits;

namespace {

struct AttentionRef {
  std::vector<double> y, lse, dqkv;
};

// y_t = Σ_{s ≤ t} P̃_ts·v_s with P = softmax(q·k/√D) and P̃ = P·Z/(1 − p), Z the mask ops.h
// defines; the backward as the chain rule gives it, with no shortcut the op uses.
AttentionRef ref_attention(const AttentionSpec& sp, int64_t N, const float* qkv, const float* dy,
                           bool dropout, uint64_t seed, uint64_t stream) {
  const int64_t T = sp.seq, H = sp.heads, D = sp.head_dim, C = sp.channels();
  const double p = dropout ? sp.dropout : 0.0, keep = p < 1 ? 1 / (1 - p) : 0;
  AttentionRef r{std::vector<double>(N * T * C), std::vector<double>(N * H * T),
                 std::vector<double>(N * T * 3 * C)};
  auto at = [&](int64_t n, int64_t t, int64_t part, int64_t h, int64_t d) {
    return ((n * T + t) * 3 + part) * C + h * D + d;
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> score(t + 1), z(t + 1);
        double mx = -1e300;
        for (int64_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double(qkv[at(n, t, 0, h, d)]) * qkv[at(n, s, 1, h, d)];
          score[s] = dot / std::sqrt(double(D));
          mx = std::max(mx, score[s]);
          const uint64_t index = static_cast<uint64_t>(((n * H + h) * T + t) * T + s);
          z[s] = p > 0 && random_uniform(seed, stream, index) < p ? 0.0
                                                                  : keep * (p > 0 ? 1 : 1 / keep);
        }
        double sum = 0;
        for (int64_t s = 0; s <= t; ++s) sum += std::exp(score[s] - mx);
        const double lse = mx + std::log(sum);
        r.lse[(n * H + h) * T + t] = lse;
        std::vector<double> P(t + 1), dP(t + 1);
        double rowdot = 0;
        for (int64_t s = 0; s <= t; ++s) {
          P[s] = std::exp(score[s] - lse);
          double dpd = 0;  // gradient of the dropped-out weight
          for (int64_t d = 0; d < D; ++d) {
            r.y[(n * T + t) * C + h * D + d] += P[s] * z[s] * qkv[at(n, s, 2, h, d)];
            dpd += double(dy[(n * T + t) * C + h * D + d]) * qkv[at(n, s, 2, h, d)];
            r.dqkv[at(n, s, 2, h, d)] += P[s] * z[s] * dy[(n * T + t) * C + h * D + d];
          }
          dP[s] = dpd * z[s];
          rowdot += P[s] * dP[s];
        }
        for (int64_t s = 0; s <= t; ++s) {
          const double ds = P[s] * (dP[s] - rowdot) / std::sqrt(double(D));
          for (int64_t d = 0; d < D; ++d) {
            r.dqkv[at(n, t, 0, h, d)] += ds * qkv[at(n, s, 1, h, d)];
            r.dqkv[at(n, s, 1, h, d)] += ds * qkv[at(n, t, 0, h, d)];
          }
        }
      }
  return r;
}

struct AttentionRun {
  Tensor y, lse, dqkv;
};
AttentionRun run_attention(Backend& be, AttentionOp& op, const AttentionSpec& sp, int64_t N,
                           const Tensor& qkv, const Tensor& dy, bool training, uint64_t seed,
                           uint64_t stream) {
  const int64_t T = sp.seq, C = sp.channels();
  AttentionRun r{be.empty({N, T, C}), be.empty({N, sp.heads, T}), be.empty({N, T, 3 * C})};
  Tensor ws = be.empty({static_cast<int64_t>(op.workspace_bytes())}, DType::u8);
  op.forward(qkv, r.y, r.lse, ws, training, seed, stream);
  op.backward(qkv, r.y, dy, r.lse, ws, seed, stream, r.dqkv);
  return r;
}

void check_close(const Tensor& got, const std::vector<double>& want, double tolerance,
                 const char* what) {
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  double worst = 0;
  int64_t where = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double err = std::abs(got.data<float>()[i] - want[i]) / (1 + std::abs(want[i]));
    if (err > worst) worst = err, where = i;
  }
  CAPTURE(what);
  CAPTURE(where);
  CHECK(worst <= tolerance);
}

}  // namespace

TEST_CASE(
    "attention matches the double reference, forward and backward, with and without dropout") {
  struct Case {
    int64_t N, T, H, D;
  };
  // Up to T = 64 and D = 64 the whole-head kernels (row strides 32 and 64, column tiles of one,
  // two and four vectors), past either the tiled ones.
  for (Case c : {Case{1, 1, 1, 1}, Case{2, 5, 1, 3}, Case{2, 17, 2, 5}, Case{1, 64, 2, 16},
                 Case{2, 20, 1, 48}, Case{1, 33, 2, 64}, Case{2, 70, 3, 32}, Case{1, 130, 2, 64},
                 Case{1, 64, 1, 80}, Case{1, 200, 1, 40}, Case{1, 300, 2, 24}})
    for (float p : {0.0f, 0.1f, 0.5f})
      for (int threads : {1, 2}) {
        CAPTURE(c.N);
        CAPTURE(c.T);
        CAPTURE(c.H);
        CAPTURE(c.D);
        CAPTURE(p);
        CAPTURE(threads);
        auto be = cpu_backend(threads);
        AttentionSpec sp{c.N, c.T, c.H, c.D, p};
        auto op = be->make_attention(sp);
        // Scores of a few units: the softmax is far from uniform.
        Tensor qkv = random_tensor({c.N, c.T, 3 * sp.channels()}, 1, 4.0f);
        Tensor dy = random_tensor({c.N, c.T, sp.channels()}, 2);
        const uint64_t seed = 17, stream = 99;
        auto run = run_attention(*be, *op, sp, c.N, qkv, dy, true, seed, stream);
        auto ref = ref_attention(sp, c.N, qkv.data<float>(), dy.data<float>(), true, seed, stream);
        check_close(run.y, ref.y, 2e-5, "y");
        check_close(run.lse, ref.lse, 2e-5, "lse");
        check_close(run.dqkv, ref.dqkv, 5e-5, "dqkv");
        // The same bits on a second call, and with one thread.
        auto again = run_attention(*be, *op, sp, c.N, qkv, dy, true, seed, stream);
        CHECK(same_bits(run.y, again.y));
        CHECK(same_bits(run.dqkv, again.dqkv));
        auto one = cpu_backend(1);
        auto single =
            run_attention(*one, *one->make_attention(sp), sp, c.N, qkv, dy, true, seed, stream);
        CHECK(same_bits(run.y, single.y));
        CHECK(same_bits(run.lse, single.lse));
        CHECK(same_bits(run.dqkv, single.dqkv));
      }
}

TEST_CASE("attention dropout: p = 0 and inference drop nothing, another seed draws another mask") {
  auto be = cpu_backend(1);
  AttentionSpec sp{2, 40, 2, 8, 0.0f};
  Tensor qkv = random_tensor({2, 40, 48}, 3, 4.0f), dy = random_tensor({2, 40, 16}, 4);
  auto plain = run_attention(*be, *be->make_attention(sp), sp, 2, qkv, dy, false, 1, 2);
  auto zero_p = run_attention(*be, *be->make_attention(sp), sp, 2, qkv, dy, true, 1, 2);
  CHECK(same_bits(plain.y, zero_p.y));
  CHECK(same_bits(plain.dqkv, zero_p.dqkv));
  sp.dropout = 0.5f;
  auto op = be->make_attention(sp);
  Tensor ws = be->empty({static_cast<int64_t>(op->workspace_bytes())}, DType::u8);
  Tensor y = be->empty({2, 40, 16}), lse = be->empty({2, 2, 40});
  op->forward(qkv, y, lse, ws, false, 1, 2);
  CHECK(same_bits(y, plain.y));
  auto a = run_attention(*be, *op, sp, 2, qkv, dy, true, 1, 2);
  auto b = run_attention(*be, *op, sp, 2, qkv, dy, true, 2, 2);
  CHECK_FALSE(same_bits(a.y, plain.y));
  CHECK_FALSE(same_bits(a.y, b.y));
  CHECK(same_bits(a.lse, plain.lse));  // the log-sum-exp is taken before dropout
}

TEST_CASE("attention is causal: inputs after position t leave the output at t unchanged") {
  auto be = cpu_backend(2);
  for (int64_t T : {150, 50}) {  // the tiled kernels, the whole-head ones
    CAPTURE(T);
    const int64_t C = 3 * 32;
    AttentionSpec sp{2, T, 3, 32, 0.1f};
    auto op = be->make_attention(sp);
    Tensor ws = be->empty({static_cast<int64_t>(op->workspace_bytes())}, DType::u8);
    Tensor qkv = random_tensor({2, T, 3 * C}, 5, 4.0f);
    Tensor y = be->empty({2, T, C}), lse = be->empty({2, 3, T});
    op->forward(qkv, y, lse, ws, true, 7, 8);
    for (int64_t t : {0, 1, 15, 16, 40, 48, 49, 63, 64, 100, 127, 128, 148}) {
      if (t >= T) continue;
      Tensor changed = Tensor::empty(qkv.shape()), y2 = be->empty({2, T, C}),
             lse2 = be->empty({2, 3, T});
      be->copy(changed, qkv);
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t i = (n * T + t + 1) * 3 * C; i < (n + 1) * T * 3 * C; ++i)
          changed.data<float>()[i] += 1.0f;
      op->forward(changed, y2, lse2, ws, true, 7, 8);
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t i = n * T * C; i < (n * T + t + 1) * C; ++i)
          REQUIRE(y2.data<float>()[i] == y.data<float>()[i]);
      bool later_changed = false;
      for (int64_t i = (t + 1) * C; i < T * C; ++i)
        later_changed |= y2.data<float>()[i] != y.data<float>()[i];
      CHECK(later_changed == (t + 1 < T));
    }
  }
}

TEST_CASE("attention's backward agrees with finite differences of its forward") {
  for (float p : {0.0f, 0.3f}) {
    CAPTURE(p);
    auto be = cpu_backend(1);
    const int64_t N = 1, T = 6, H = 2, D = 3, C = H * D;
    AttentionSpec sp{N, T, H, D, p};
    auto op = be->make_attention(sp);
    Tensor ws = be->empty({static_cast<int64_t>(op->workspace_bytes())}, DType::u8);
    Tensor qkv = random_tensor({N, T, 3 * C}, 6, 2.0f), g = random_tensor({N, T, C}, 7);
    Tensor y = be->empty({N, T, C}), lse = be->empty({N, H, T}), dqkv = be->empty({N, T, 3 * C});
    auto loss = [&] {
      op->forward(qkv, y, lse, ws, true, 3, 4);
      double l = 0;
      for (int64_t i = 0; i < y.numel(); ++i) l += double(y.data<float>()[i]) * g.data<float>()[i];
      return l;
    };
    loss();
    op->backward(qkv, y, g, lse, ws, 3, 4, dqkv);
    const float h = 1e-2f;
    for (int64_t i = 0; i < qkv.numel(); ++i) {
      float& v = qkv.data<float>()[i];
      const float saved = v;
      v = saved + h;
      const double plus = loss();
      v = saved - h;
      const double minus = loss();
      v = saved;
      CHECK(dqkv.data<float>()[i] ==
            doctest::Approx((plus - minus) / (2 * h)).epsilon(2e-2).scale(2e-2));
    }
  }
}

TEST_CASE("attention takes a smaller batch than its spec and checks its workspace") {
  auto be = cpu_backend(1);
  AttentionSpec sp{4, 9, 2, 4, 0.0f};
  auto op = be->make_attention(sp);
  Tensor qkv = random_tensor({1, 9, 24}, 8), dy = random_tensor({1, 9, 8}, 9);
  auto run = run_attention(*be, *op, sp, 1, qkv, dy, true, 0, 0);
  auto ref = ref_attention(sp, 1, qkv.data<float>(), dy.data<float>(), false, 0, 0);
  check_close(run.y, ref.y, 2e-5, "y");
  check_close(run.dqkv, ref.dqkv, 5e-5, "dqkv");
  Tensor small = be->empty({8}, DType::u8), y = be->empty({1, 9, 8}), lse = be->empty({1, 2, 9});
  CHECK_THROWS_WITH(op->forward(qkv, y, lse, small, false, 0, 0), doctest::Contains("workspace"));
}
