// The CPU backend's element-wise, pooling, batch-norm and layout ops in bf16, each against the
// f32 op on the same bf16-representable values. Ops that only move, pick or mask values (casts,
// channel copies, ReLU, max pooling) and ops whose f32 arithmetic is the same loop as f32's
// with one rounding at the store (add, add_relu, average pooling) must give exactly the f32
// result rounded to nearest even (cpu::f32_to_bf16). Batch norm runs other oneDNN kernels in
// bf16, whose f32 reductions may sum in another order: there the bound is one bf16 rounding
// (relative 2^-9, a whole ulp of 2^-8 where the f32 results straddle a rounding boundary)
// around the f32 op's result plus the f32 statistics' own differences.
#include <doctest/doctest.h>

#include <algorithm>  // max
#include <bit>        // bit_cast
#include <cmath>      // abs, ldexp
#include <cstdint>
#include <cstring>  // memcmp: same workspace
#include <string>
#include <vector>

#include "backend/cpu/bf16.h"
#include "backend/cpu/cpu_backend.h"
#include "bf16_tensors.h"  // to_bf16, to_f32: the reference casts
#include "core/rng.h"

using namespace dtrain;
using cpu::bf16_t;

using dtrain::test::to_bf16;
using dtrain::test::to_f32;

namespace {

// Skips the test case (with a message) on CPUs without native bf16.
#define SKIP_WITHOUT_BF16(be)                                          \
  if (const std::string why = (be).bf16_unavailable(); !why.empty()) { \
    MESSAGE("bf16 not tested: " << why);                               \
    return;                                                            \
  }

// f32 values in [-scale/2, scale/2) + offset, each rounded to bf16 (so both ops see them exactly).
Tensor bf16_values(const Shape& s, uint64_t stream, float scale = 1.0f, float offset = 0.0f) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] =
        cpu::round_to_bf16((random_uniform(17, stream, i) - 0.5f) * scale + offset);
  return t;
}

// Few distinct values (as after a ReLU: many zeros), so that max pooling meets ties.
Tensor tied_values(const Shape& s, uint64_t stream) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] =
        static_cast<float>(static_cast<int>(random_uniform(18, stream, i) * 3)) - 1;
  return t;
}

// Every bf16 element is the f32 element rounded to nearest even, bit for bit.
void check_rounded(const Tensor& bf, const Tensor& f32, const char* what) {
  REQUIRE(bf.dtype() == DType::bf16);
  REQUIRE(bf.numel() == f32.numel());
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < bf.numel(); ++i)
    if (bf.data<bf16_t>()[i] != cpu::f32_to_bf16(f32.data<float>()[i])) {
      if (first < 0) first = i;
      ++wrong;
    }
  INFO(std::string(what) << ": " << wrong << " of " << bf.numel()
                         << " elements differ, the first at " << first);
  CHECK(wrong == 0);
}

// |bf − f32| ≤ rel·|f32| + abs for every element.
void check_close(const Tensor& bf, const Tensor& f32, double rel, double abs, const char* what) {
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < bf.numel(); ++i) {
    const double want = f32.data<float>()[i];
    const double got = cpu::bf16_to_f32(bf.data<bf16_t>()[i]);
    if (std::abs(got - want) > rel * std::abs(want) + abs) {
      if (first < 0) first = i;
      ++wrong;
    }
  }
  INFO(std::string(what) << ": " << wrong << " of " << bf.numel()
                         << " elements outside the bound, the first at " << first);
  CHECK(wrong == 0);
}

double max_abs(const Tensor& f) {
  double m = 0;
  for (int64_t i = 0; i < f.numel(); ++i) m = std::max(m, double(std::abs(f.data<float>()[i])));
  return m;
}

}  // namespace

TEST_CASE("bf16 reorders round to nearest even as bf16.h, any shape and block, and widen exactly") {
  CpuBackend be;
  SKIP_WITHOUT_BF16(be);
  // Values across the exponent range, and ties below and above an even mantissa; no f32
  // subnormals (oneDNN's conversion instruction reads them as zero, bf16.h keeps them).
  const std::vector<uint32_t> special{0x3f808000u, 0x3f818000u, 0xbf808000u, 0xbf818000u,
                                      0x3f80ffffu, 0x00800000u, 0x7f7fffffu, 0x7f800000u,
                                      0xff800000u, 0x80000000u, 0x00000000u};
  auto wide = [&](const Shape& s) {
    Tensor t = Tensor::empty(s);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = i < static_cast<int64_t>(special.size())
                               ? std::bit_cast<float>(special[i])
                               : std::ldexp(random_uniform(19, 1, i) - 0.5f,
                                            static_cast<int>(random_uniform(19, 2, i) * 60) - 30);
    return t;
  };
  SUBCASE("flat: [N, F], [N, T, C], [N, C, H, W] with block 1") {
    for (const Shape& s : {Shape{7, 131}, Shape{3, 5, 96}, Shape{2, 3, 5, 7}, Shape{300, 300}}) {
      CAPTURE(s.str());
      Tensor x = wide(s), b = Tensor::empty(s, DType::bf16), back = Tensor::empty(s);
      be.reorder(b, 1, x, 1);
      check_rounded(b, x, "f32 → bf16");
      be.reorder(back, 1, b, 1);
      CHECK(std::memcmp(back.raw(), to_f32(b).raw(), back.bytes()) == 0);  // widening is exact
    }
  }
  SUBCASE("between blocks: f32 plain ↔ bf16 16c, bf16 16c ↔ bf16 plain") {
    const Shape s{2, 32, 5, 3};
    Tensor x = wide(s), x16 = Tensor::empty(s);
    be.reorder(x16, 16, x, 1);  // the f32 reorder gives the blocked reference layout
    Tensor b16 = Tensor::empty(s, DType::bf16), b1 = Tensor::empty(s, DType::bf16);
    be.reorder(b16, 16, x, 1);
    check_rounded(b16, x16, "f32 plain → bf16 16c");
    be.reorder(b1, 1, b16, 16);
    check_rounded(b1, x, "bf16 16c → bf16 plain");
    Tensor again16 = Tensor::empty(s, DType::bf16);
    be.reorder(again16, 16, b1, 1);
    CHECK(std::memcmp(again16.raw(), b16.raw(), b16.bytes()) == 0);
    Tensor f1 = Tensor::empty(s), f16 = Tensor::empty(s);
    be.reorder(f1, 1, b16, 16);  // bf16 16c → f32 plain: x rounded
    CHECK(std::memcmp(f1.raw(), to_f32(to_bf16(x)).raw(), f1.bytes()) == 0);
    be.reorder(f16, 16, b1, 1);  // bf16 plain → f32 16c
    CHECK(std::memcmp(f16.raw(), to_f32(b16).raw(), f16.bytes()) == 0);
    Tensor x8 = Tensor::empty(s), b8 = Tensor::empty(s, DType::bf16);  // AVX2's blocks
    be.reorder(x8, 8, x, 1);
    be.reorder(b8, 8, b16, 16);
    check_rounded(b8, x8, "bf16 16c → bf16 8c");
    Tensor c16 = Tensor::empty(s, DType::bf16);
    be.reorder(c16, 16, x16, 16);  // f32 16c → bf16 16c
    CHECK(std::memcmp(c16.raw(), b16.raw(), b16.bytes()) == 0);
  }
}

TEST_CASE("bf16 copy_channels copies the channels the f32 copy does, plain and blocked") {
  CpuBackend be;
  SKIP_WITHOUT_BF16(be);
  for (ChannelBlock block : {1, 16}) {
    CAPTURE(block);
    Tensor src = bf16_values({2, 32, 3, 5}, 3);
    Tensor dst = Tensor::zeros({2, 48, 3, 5});
    Tensor src_b = to_bf16(src), dst_b = to_bf16(dst);
    be.copy_channels(dst, 16, src, block == 1 ? 3 : 16, 16, block);
    be.copy_channels(dst_b, 16, src_b, block == 1 ? 3 : 16, 16, block);
    check_rounded(dst_b, dst, "copy_channels");
  }
}

// add and add_relu: both operands widen exactly, the f32 sum is the f32 op's, and it is rounded
// once, so the expected bits are f32_to_bf16 of the f32 add on the widened values (a sum of two
// bf16 values is exact in f32 unless their exponents differ by more than 16; the bound is the
// same rounding either way).
TEST_CASE("bf16 add and add_relu: the f32 sum of the same values rounded once") {
  CpuBackend be;
  SKIP_WITHOUT_BF16(be);
  for (int64_t n : {int64_t{37}, int64_t{1} << 17}) {  // a vector tail; the threaded loop
    CAPTURE(n);
    Tensor a = bf16_values({n}, 4, 8.0f), b = bf16_values({n}, 5, 8.0f);
    // Some pairs cancel, some differ in exponent by more than f32's 24 bits of a sum.
    for (int64_t i = 0; i < n; i += 7) b.data<float>()[i] = -a.data<float>()[i];
    for (int64_t i = 3; i < n; i += 11) b.data<float>()[i] *= 1e-6f;
    for (int64_t i = 3; i < n; i += 11) b.data<float>()[i] = cpu::round_to_bf16(b.data<float>()[i]);
    for (bool relu : {false, true}) {
      CAPTURE(relu);
      Tensor sum = Tensor::empty({n});
      relu ? be.add_relu(a, b, sum) : be.add(a, b, sum);
      Tensor ab = to_bf16(a), bb = to_bf16(b), out = Tensor::empty({n}, DType::bf16);
      relu ? be.add_relu(ab, bb, out) : be.add(ab, bb, out);
      check_rounded(out, sum, "a + b");
      Tensor alias = to_bf16(a);  // out may be a (the graph accumulates gradients so)
      relu ? be.add_relu(alias, bb, alias) : be.add(alias, bb, alias);
      CHECK(std::memcmp(alias.raw(), out.raw(), out.bytes()) == 0);
      alias = to_bf16(b);  // or b
      relu ? be.add_relu(ab, alias, alias) : be.add(ab, alias, alias);
      CHECK(std::memcmp(alias.raw(), out.raw(), out.bytes()) == 0);
    }
  }
}

TEST_CASE("bf16 relu: forward and backward exact") {
  CpuBackend be;
  SKIP_WITHOUT_BF16(be);
  const Shape s{3, 1000};
  Tensor x = bf16_values(s, 6), dy = bf16_values(s, 7), y = Tensor::empty(s), dx = Tensor::empty(s);
  auto f32 = be.make_relu(s);
  f32->forward(x, y);
  f32->backward(x, y, dy, dx);
  auto op = be.make_relu(s, DType::bf16);
  Tensor yb = Tensor::empty(s, DType::bf16), dxb = Tensor::empty(s, DType::bf16);
  op->forward(to_bf16(x), yb);
  check_rounded(yb, y, "y");
  op->backward(Tensor(), yb, to_bf16(dy), dxb);
  check_rounded(dxb, dx, "dx");
  Tensor in_place = to_bf16(x);  // the forward may run in place
  op->forward(in_place, in_place);
  CHECK(std::memcmp(in_place.raw(), yb.raw(), yb.bytes()) == 0);
}

// Pooling in bf16 runs the f32 loops on widened values and rounds each output once: maxima are
// inputs (exact), averages and summed gradients are the f32 op's rounded, so every case expects
// the f32 op's bits rounded, and max pooling the f32 op's workspace byte for byte (the same
// elements chosen, ties to the first in scan order).
TEST_CASE("bf16 pooling: the f32 op's outputs and gradients rounded, the same argmax") {
  CpuBackend be;
  SKIP_WITHOUT_BF16(be);
  struct Case {
    PoolSpec spec;
    bool ties;
  };
  std::vector<Case> cases{
      {{PoolKind::max, 2, 32, 8, 10, 2, 2, 2, 2, 0, 0}, true},  // 2×2, VGG/LeNet
      {{PoolKind::max, 2, 16, 6, 41, 2, 2, 2, 2, 0, 0}, true},  // 2×2: a full vector and a tail
      {{PoolKind::max, 2, 32, 7, 7, 3, 3, 2, 2, 0, 0, true}, false},  // overlapping, ceil
      {{PoolKind::max, 2, 32, 9, 9, 3, 3, 2, 2, 1, 1}, true},         // padded (ResNet stem)
      {{PoolKind::avg, 2, 32, 6, 6, 3, 3, 2, 2, 1, 1}, false},        // include padding
      {{PoolKind::avg, 2, 32, 7, 7, 3, 3, 2, 2, 1, 1, true}, false},  // ceil overhang
      {{PoolKind::avg, 2, 32, 6, 6, 3, 3, 2, 2, 1, 1, false, false}, false},  // exclude padding
      {{PoolKind::avg, 3, 32, 7, 7, 7, 7, 1, 1, 0, 0}, false},                // global average
  };
  for (const Case& c : cases) {
    for (ChannelBlock block : {1, 16}) {
      PoolSpec s = c.spec;
      s.block = block;
      CAPTURE(block);
      CAPTURE(s.kind == PoolKind::max);
      CAPTURE(s.kernel_h);
      CAPTURE(s.ceil_mode);
      Tensor x = c.ties ? tied_values(s.input_shape(), 8) : bf16_values(s.input_shape(), 8, 4.0f);
      Tensor dy = bf16_values(s.output_shape(), 9);
      auto f32 = be.make_pool(s);
      s.dtype = DType::bf16;
      auto op = be.make_pool(s);
      REQUIRE(op->workspace_bytes() == f32->workspace_bytes());
      const auto ws_shape = Shape{std::max<int64_t>(1, f32->workspace_bytes())};
      Tensor ws = Tensor::zeros(ws_shape, DType::u8), wsb = Tensor::zeros(ws_shape, DType::u8);
      Tensor y = Tensor::empty(s.output_shape()), dx = Tensor::empty(s.input_shape());
      f32->forward(x, y, ws, true);
      f32->backward(x, y, dy, ws, dx);
      Tensor xb = to_bf16(x), yb = Tensor::empty(s.output_shape(), DType::bf16),
             dxb = Tensor::empty(s.input_shape(), DType::bf16);
      op->forward(xb, yb, wsb, true);
      op->backward(xb, yb, to_bf16(dy), wsb, dxb);
      check_rounded(yb, y, "y");
      check_rounded(dxb, dx, "dx");
      CHECK(std::memcmp(ws.raw(), wsb.raw(), ws.bytes()) == 0);
      Tensor y_infer = Tensor::empty(s.output_shape(), DType::bf16);  // no workspace
      op->forward(xb, y_infer, Tensor(), false);
      CHECK(std::memcmp(y_infer.raw(), yb.raw(), yb.bytes()) == 0);
    }
  }
}

// Batch norm in bf16 runs oneDNN's bf16 kernels: statistics in f32 (perhaps summed in another
// order than the f32 kernel's: relative 1e-5), y and dx rounded once from f32. Bounds: y within
// a bf16 ulp (2^-8 relative: half an ulp of rounding, and a neighbouring value where the two
// kernels' f32 results straddle a rounding boundary) plus 1e-5 of the statistics' differences;
// dx the same relative bound plus 2^-8 of its largest element (dx = scale/σ·(dy − mean(dy) −
// x̂·mean(dy·x̂)) cancels, so an element's error follows the terms', not its own size);
// dscale and dshift are f32 sums over the same bf16 dy: relative 1e-4 of their largest element.
TEST_CASE("bf16 batch norm: training, inference and backward against f32") {
  CpuBackend be;
  SKIP_WITHOUT_BF16(be);
  for (int64_t pixels : {30, 1})  // [N, C, 5, 6]; [N, C] (the layer's 1-D form)
    for (ChannelBlock block : {1, 16})
      for (bool relu : {false, true}) {
        CAPTURE(pixels);
        CAPTURE(block);
        CAPTURE(relu);
        BatchNormSpec s{
            pixels == 1 ? 16 : 4, 32, pixels == 1 ? 1 : 5, pixels == 1 ? 1 : 6, 1e-5f, relu, block};
        const int64_t C = s.channels;
        Tensor x = bf16_values(s.shape(), 10, 4.0f, 0.5f), dy = bf16_values(s.shape(), 11);
        Tensor scale = bf16_values({C}, 12, 1.0f, 1.0f), shift = bf16_values({C}, 13, 0.5f);
        auto f32 = be.make_batchnorm(s);
        s.dtype = DType::bf16;
        auto op = be.make_batchnorm(s);
        const Shape ws_shape{
            std::max<int64_t>(1, std::max(f32->workspace_bytes(), op->workspace_bytes()))};
        Tensor ws = Tensor::zeros(ws_shape, DType::u8), wsb = Tensor::zeros(ws_shape, DType::u8);
        Tensor y = Tensor::empty(s.shape()), mean = Tensor::empty({C}), var = Tensor::empty({C});
        f32->forward_training(x, scale, shift, y, mean, var, ws);
        Tensor xb = to_bf16(x), yb = Tensor::empty(s.shape(), DType::bf16);
        Tensor meanb = Tensor::empty({C}), varb = Tensor::empty({C});
        op->forward_training(xb, scale, shift, yb, meanb, varb, wsb);
        for (int64_t c = 0; c < C; ++c) {
          CHECK(meanb.data<float>()[c] == doctest::Approx(mean.data<float>()[c]).epsilon(1e-5));
          CHECK(varb.data<float>()[c] == doctest::Approx(var.data<float>()[c]).epsilon(1e-5));
        }
        check_close(yb, y, std::ldexp(1.0, -8), 1e-5, "training y");

        Tensor yi = Tensor::empty(s.shape()), yib = Tensor::empty(s.shape(), DType::bf16);
        f32->forward_inference(x, scale, shift, mean, var, yi);
        op->forward_inference(xb, scale, shift, mean, var, yib);
        check_close(yib, yi, std::ldexp(1.0, -8), 1e-5, "inference y");

        // The backward of each op from its own forward (mask, statistics), with the same dy.
        Tensor dx = Tensor::empty(s.shape()), dscale = Tensor::empty({C}),
               dshift = Tensor::empty({C});
        f32->backward(x, y, dy, scale, mean, var, ws, dx, dscale, dshift);
        Tensor dxb = Tensor::empty(s.shape(), DType::bf16), dscaleb = Tensor::empty({C}),
               dshiftb = Tensor::empty({C});
        op->backward(xb, yb, to_bf16(dy), scale, meanb, varb, wsb, dxb, dscaleb, dshiftb);
        check_close(dxb, dx, std::ldexp(1.0, -8), std::ldexp(max_abs(dx), -8), "dx");
        const double ds_tol = 1e-4 * max_abs(dscale), dsh_tol = 1e-4 * max_abs(dshift);
        for (int64_t c = 0; c < C; ++c) {
          CHECK(std::abs(dscaleb.data<float>()[c] - dscale.data<float>()[c]) <= ds_tol);
          CHECK(std::abs(dshiftb.data<float>()[c] - dshift.data<float>()[c]) <= dsh_tol);
        }
      }
}
