// The CPU backend's sequence-model ops in bf16 (causal attention, GELU, dropout) against the
// same ops in f32 on the same bf16-representable inputs. bf16 keeps 8 significant bits (7 stored
// and the implicit one): rounding to nearest moves a value by at most half a unit in the last
// place, 2^-9 relative at the top of a binade but up to 2^-8 just above a power of two (GELU's
// case below meets that bound). Each tolerance says which roundings an output went through. Every
// case skips when the CPU cannot train in bf16 (CpuBackend::bf16_unavailable).
#include <doctest/doctest.h>

#include <algorithm>  // max
#include <bit>        // bit_cast
#include <cmath>
#include <cstring>  // memcmp
#include <string>

#include "backend/cpu/bf16.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd.h"  // the vector conversions the kernels use
#include "bf16_tensors.h"      // to_bf16, to_f32: the reference casts
#include "sequence_test_util.h"

using namespace dtrain;
using cpu::bf16_t;
using cpu::round_to_bf16;
using dtrain::test::cpu_backend;
using dtrain::test::random_tensor;
using dtrain::test::same_bits;

using dtrain::test::to_bf16;
using dtrain::test::to_f32;

namespace {

constexpr double kBf16Rounding = 1.0 / 256;  // 2^-8: one rounding to nearest, at most, relative

bool bf16_skipped() {
  const std::string why = CpuBackend().bf16_unavailable();
  if (why.empty()) return false;
  MESSAGE("bf16 skipped: " << why);
  return true;
}

// A random f32 tensor rounded to bf16-representable values, in f32.
Tensor representable(const Shape& s, uint64_t stream, float scale) {
  Tensor t = random_tensor(s, stream, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = round_to_bf16(t.data<float>()[i]);
  return t;
}

double max_abs(const Tensor& f) {
  double m = 0;
  for (int64_t i = 0; i < f.numel(); ++i) m = std::max(m, std::abs(double(f.data<float>()[i])));
  return m;
}

// |got − want| ≤ relative·|want| + absolute for every element, got bf16 and want f32.
void check_within(const Tensor& got, const Tensor& want, double relative, double absolute,
                  const char* what) {
  REQUIRE(got.dtype() == DType::bf16);
  REQUIRE(got.numel() == want.numel());
  double worst = 0;  // the largest error in units of the element's tolerance
  int64_t where = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double w = want.data<float>()[i], g = cpu::bf16_to_f32(got.data<bf16_t>()[i]);
    const double err = std::abs(g - w) / (relative * std::abs(w) + absolute);
    if (!(err <= worst)) worst = err, where = i;
  }
  INFO(std::string(what));
  CAPTURE(where);
  CHECK(worst <= 1.0);
}

// The tensor that the f32 op would have written, rounded to bf16 once, bit for bit.
void check_rounded(const Tensor& got, const Tensor& want, const char* what) {
  REQUIRE(got.dtype() == DType::bf16);
  REQUIRE(got.numel() == want.numel());
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < got.numel(); ++i)
    if (got.data<bf16_t>()[i] != cpu::f32_to_bf16(want.data<float>()[i])) {
      if (first < 0) first = i;
      ++mismatches;
    }
  INFO(std::string(what));
  CAPTURE(first);
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("bf16 attention matches f32 on the same inputs, forward and backward, both kernels") {
  if (bf16_skipped()) return;
  struct Case {
    int64_t N, T, H, D;
  };
  // Up to T = 64 and D = 64 the whole-head kernels (row strides 32 and 64; D = 5 and 48 copy
  // the value and key rows, D = 64 reads f32 ones in place), past either the tiled ones.
  for (Case c : {Case{2, 17, 2, 5}, Case{1, 64, 3, 32}, Case{2, 40, 2, 64}, Case{2, 20, 1, 48},
                 Case{1, 130, 2, 64}, Case{2, 70, 3, 24}, Case{1, 64, 1, 80}})
    for (float p : {0.0f, 0.3f})
      for (int threads : {1, 2}) {
        CAPTURE(c.N);
        CAPTURE(c.T);
        CAPTURE(c.H);
        CAPTURE(c.D);
        CAPTURE(p);
        CAPTURE(threads);
        auto be = cpu_backend(threads);
        const int64_t C = c.H * c.D;
        AttentionSpec sp{c.N, c.T, c.H, c.D, p};
        AttentionSpec sp16 = sp;
        sp16.dtype = DType::bf16;
        auto op32 = be->make_attention(sp);
        auto op16 = be->make_attention(sp16);
        // Scores of a few units (the softmax far from uniform), on bf16-representable inputs.
        const Tensor qkv = representable({c.N, c.T, 3 * C}, 1, 4.0f);
        const Tensor dy = representable({c.N, c.T, C}, 2, 1.0f);
        const uint64_t seed = 17, stream = 99;
        Tensor ws = be->empty(
            {static_cast<int64_t>(std::max(op32->workspace_bytes(), op16->workspace_bytes()))},
            DType::u8);

        Tensor y32 = be->empty({c.N, c.T, C}), lse32 = be->empty({c.N, c.H, c.T});
        Tensor y16 = be->empty({c.N, c.T, C}, DType::bf16), lse16 = be->empty({c.N, c.H, c.T});
        const Tensor qkv16 = to_bf16(qkv);
        op32->forward(qkv, y32, lse32, ws, true, seed, stream);
        op16->forward(qkv16, y16, lse16, ws, true, seed, stream);
        // y is a (dropped-out, rescaled) convex combination of the rows of v, so it is at most
        // keep·max|v| (max|qkv| bounds max|v|): one rounding of it is within 2^-8·keep·max|v|,
        // and 2^-8·|y| relative; twice both leaves room for f32 sums running in another order.
        const double keep = p > 0 ? 1 / (1 - p) : 1;
        check_within(y16, y32, 2 * kBf16Rounding, 2 * kBf16Rounding * keep * max_abs(qkv), "y");
        // lse stays f32 and sees the same inputs: f32 rounding only (relative to 1 + |lse|).
        for (int64_t i = 0; i < lse32.numel(); ++i)
          REQUIRE(std::abs(lse16.data<float>()[i] - lse32.data<float>()[i]) <=
                  1e-6 * (1 + std::abs(lse32.data<float>()[i])));

        // The backward of both reads the bf16 forward's y (what a bf16 model keeps) and lse.
        const Tensor y = to_f32(y16);
        Tensor dqkv32 = be->empty({c.N, c.T, 3 * C});
        Tensor dqkv16 = be->empty({c.N, c.T, 3 * C}, DType::bf16);
        op32->backward(qkv, y, dy, lse16, ws, seed, stream, dqkv32);
        op16->backward(qkv16, y16, to_bf16(dy), lse16, ws, seed, stream, dqkv16);
        // dqkv: one rounding of each element (2^-8 relative), doubled for the f32 sums' order;
        // plus 1e-5 of the largest gradient for elements that are sums cancelling to near 0,
        // whose f32 value itself depends on that order.
        check_within(dqkv16, dqkv32, 2 * kBf16Rounding, 1e-5 * max_abs(dqkv32), "dqkv");
        // Dropout drew the same weights in both (the same indices): had it not, y and dqkv
        // would differ by whole weights, far beyond the tolerances above.
      }
}

TEST_CASE("bf16 attention with these kernels is the f32 op's result rounded once") {
  // The bf16 kernels widen their inputs exactly and multiply f32 tiles: on the same inputs the
  // f32 arithmetic is the same, so each stored value is the f32 op's, rounded to nearest even.
  if (bf16_skipped()) return;
  for (int64_t T : {48, 150})  // the whole-head kernels, the tiled ones
    for (float p : {0.0f, 0.2f}) {
      CAPTURE(T);
      CAPTURE(p);
      auto be = cpu_backend(1);
      AttentionSpec sp{2, T, 3, 32, p};
      AttentionSpec sp16 = sp;
      sp16.dtype = DType::bf16;
      auto op32 = be->make_attention(sp);
      auto op16 = be->make_attention(sp16);
      const int64_t C = 96;
      const Tensor qkv = representable({2, T, 3 * C}, 3, 4.0f);
      const Tensor dy = representable({2, T, C}, 4, 1.0f);
      Tensor ws = be->empty({static_cast<int64_t>(op16->workspace_bytes())}, DType::u8);
      Tensor y32 = be->empty({2, T, C}), lse32 = be->empty({2, 3, T});
      Tensor y16 = be->empty({2, T, C}, DType::bf16), lse16 = be->empty({2, 3, T});
      op32->forward(qkv, y32, lse32, ws, true, 5, 6);
      op16->forward(to_bf16(qkv), y16, lse16, ws, true, 5, 6);
      check_rounded(y16, y32, "y");
      CHECK(same_bits(lse16, lse32));
      Tensor dqkv32 = be->empty({2, T, 3 * C}), dqkv16 = be->empty({2, T, 3 * C}, DType::bf16);
      op32->backward(qkv, to_f32(y16), dy, lse32, ws, 5, 6, dqkv32);
      op16->backward(to_bf16(qkv), y16, to_bf16(dy), lse16, ws, 5, 6, dqkv16);
      check_rounded(dqkv16, dqkv32, "dqkv");
    }
}

TEST_CASE("bf16 GELU matches f32 on the same inputs, both forms, forward and backward") {
  if (bf16_skipped()) return;
  auto be = cpu_backend(2);
  for (GeluApproximation form : {GeluApproximation::none, GeluApproximation::tanh})
    for (int64_t n : {37, 100003}) {  // a masked tail only, and chunks over two threads
      CAPTURE(static_cast<int>(form));
      CAPTURE(n);
      const Shape shape{n};
      Tensor x = representable(shape, 5, 16.0f);  // [−8, 8): both tails and the bend
      x.data<float>()[0] = 0.0f;
      x.data<float>()[1] = round_to_bf16(-30.0f);
      x.data<float>()[2] = round_to_bf16(30.0f);
      const Tensor dy = representable(shape, 6, 2.0f);
      auto op32 = be->make_gelu({shape, form});
      auto op16 = be->make_gelu({shape, form, DType::bf16});
      Tensor y32 = be->empty(shape), y16 = be->empty(shape, DType::bf16);
      op32->forward(x, y32);
      op16->forward(to_bf16(x), y16);
      // y: computed in f32 from the same x and rounded once: within 2^-8 of the f32 result,
      // relative, plus 1e-6 absolute for the f32 kernels' own error near 0 (the non-AVX-512
      // build's bf16 path evaluates the formulas with libm, its f32 path with oneDNN).
      check_within(y16, y32, kBf16Rounding, 1e-6, "y");
      Tensor dx32 = be->empty(shape), dx16 = be->empty(shape, DType::bf16);
      op32->backward(x, dy, dx32);
      op16->backward(to_bf16(x), to_bf16(dy), dx16);
      // dx = dy·slope(x) from bf16-representable dy and x, rounded once: the same bound.
      check_within(dx16, dx32, kBf16Rounding, 1e-6, "dx");
    }
}

TEST_CASE("bf16 dropout draws f32's mask and rounds f32's values once, plain and blocked") {
  if (bf16_skipped()) return;
  auto be = cpu_backend(2);
  struct Case {
    Shape shape;
    ChannelBlock block;
  };
  // 100000 elements run over the team; [2, 32, 3, 5] in blocks of 16 draws the plain indices.
  for (const Case& c : {Case{Shape{100000}, 1}, Case{Shape{2, 32, 3, 5}, 16}})
    for (float p : {0.1f, 0.5f}) {
      CAPTURE(c.shape.str());
      CAPTURE(p);
      auto op32 = be->make_dropout({c.shape, c.block});
      auto op16 = be->make_dropout({c.shape, c.block, DType::bf16});
      const Tensor x = representable(c.shape, 7, 4.0f), dy = representable(c.shape, 8, 2.0f);
      Tensor y32 = be->empty(c.shape), m32 = be->empty(c.shape, DType::u8);
      Tensor y16 = be->empty(c.shape, DType::bf16), m16 = be->empty(c.shape, DType::u8);
      op32->forward(x, y32, m32, p, 11, 12);
      op16->forward(to_bf16(x), y16, m16, p, 11, 12);
      // The mask is drawn from the element's index alone: the same bytes.
      CHECK(same_bits(m16, m32));
      // y = x·mask/(1 − p) in f32, rounded once: exactly f32's value rounded (no tolerance).
      check_rounded(y16, y32, "y");
      Tensor dx32 = be->empty(c.shape), dx16 = be->empty(c.shape, DType::bf16);
      op32->backward(dy, m32, p, dx32);
      op16->backward(to_bf16(dy), m16, p, dx16);
      check_rounded(dx16, dx32, "dx");  // likewise
    }
}

TEST_CASE("bf16 vector conversions: exact widening, rounding to nearest even as f32_to_bf16") {
  // The kernels' loads and stores of bf16 (simd.h), on ties, carries into the exponent,
  // denormals, infinities and NaNs, whole vectors and masked tails.
  const uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f7fffffu,
                           0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x80008000u,
                           0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                           0xffffffffu, 0x00000000u, 0x80000000u, 0x40490fdbu};
  float in[16];
  for (int l = 0; l < 16; ++l) std::memcpy(&in[l], &bits[l], sizeof(float));
  uint16_t whole[16], part[16] = {};
  cpu::simd::store_bf16(whole, cpu::simd::load(in));
  cpu::simd::store_part_bf16(part, cpu::simd::load(in), 5);
  for (int l = 0; l < 16; ++l) {
    CAPTURE(l);
    CHECK(whole[l] == cpu::f32_to_bf16(in[l]));
    CHECK(part[l] == (l < 5 ? cpu::f32_to_bf16(in[l]) : 0));
  }
  const cpu::simd::Vec wide = cpu::simd::load_bf16(whole),
                       tail = cpu::simd::load_part_bf16(whole, 3);
  for (int l = 0; l < 16; ++l) {
    CAPTURE(l);
    const uint32_t want = static_cast<uint32_t>(whole[l]) << 16;
    CHECK(std::bit_cast<uint32_t>(wide[l]) == want);
    CHECK(std::bit_cast<uint32_t>(tail[l]) == (l < 3 ? want : 0u));
  }
}
