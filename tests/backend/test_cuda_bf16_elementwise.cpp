// The CUDA backend's element-wise ops in bf16 against the CPU backend's bf16 ops (the tested
// reference of mixed precision) on the same bf16 inputs. Ops that only move, pick or mask values
// (casts, ReLU, dropout's mask) and ops that compute the same f32 expression and round once (add,
// add_relu, dropout's scaling) must agree bit for bit: both round to nearest even. GELU computes
// in f32 with CUDA's erff/tanhf/expf against oneDNN's polynomials (a few f32 ulps apart); one
// rounding to bf16 may then land on either neighbour, so the bound is one bf16 ulp of each
// element (2^-8 to 2^-7 of its value) plus the f32 results' own difference (expect_close_bf16);
// pooling averages, batch norm and attention are bounded the same way. Without a usable GPU the
// binary runs nothing (cuda_test_main.cpp); without native bf16 on the CPU (the reference) each
// case says so and passes.
#include <doctest/doctest.h>

#include <algorithm>  // clamp, max
#include <cmath>      // fabs, isnan, ldexp
#include <cstdint>
#include <cstring>  // memcmp, memcpy
#include <iostream>
#include <numeric>  // gcd
#include <string>
#include <thread>  // hardware_concurrency

#include "backend/backend.h"            // make_backend: the CPU reference
#include "backend/cpu/bf16.h"           // bf16_t, f32_to_bf16, bf16_to_f32
#include "backend/cuda/cuda_backend.h"  // make_cuda_backend
#include "core/rng.h"                   // random_uniform
#include "cuda_test_backends.h"         // the one CPU reference and GPU of the binary

using namespace dtrain;
using cpu::bf16_t;

namespace {

constexpr uint64_t kSeed = 4242;
// The f32 results' own differences, relative to max |cpu| (the f32 ops' bounds in
// test_cuda_ops.cpp, doubled: each side is that far from the exact value).
constexpr double kGeluF32 = 2e-5;
constexpr double kPoolAvgF32 = 2e-5;
constexpr double kBatchNormF32 = 2e-5;
constexpr double kBatchNormGradF32 = 2e-4;  // dx cancels: dy − mean(dy) − x̂·mean(dy·x̂)
constexpr double kAttentionF32 = 4e-5;
constexpr double kAttentionGradF32 = 1e-4;

Backend& cpu_ref() {
  return cuda_test::cpu_reference();
}
Backend& cuda_be() {
  return cuda_test::gpu();
}

#define SKIP_WITHOUT_CPU_BF16()                                                 \
  if (const std::string why = cpu_ref().bf16_unavailable(); !why.empty()) {     \
    MESSAGE("bf16 not tested (the CPU reference has no native bf16): " << why); \
    return;                                                                     \
  }

// Host bf16 values: uniform in [-scale/2, scale/2) + offset, rounded to nearest even.
Tensor host_bf16(const Shape& s, uint64_t stream, float scale = 4.0f, float offset = 0.0f) {
  Tensor t = Tensor::empty(s, DType::bf16);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<bf16_t>()[i] =
        cpu::f32_to_bf16((random_uniform(kSeed, stream, i) - 0.5f) * scale + offset);
  return t;
}
// Host f32 values with every rounding case of f32 → bf16: random values, exact ties (the low
// half 0x8000 with even and odd kept halves), values just above and below a tie, zeros,
// infinities and the largest finite values (which round to it or up to infinity); with
// `subnormals`, every eighth value a subnormal instead of near the largest. NaNs are left out:
// the CPU keeps a NaN's payload, CUDA's conversion returns its canonical NaN, and both are NaN.
Tensor host_f32_rounding_cases(int64_t n, uint64_t stream, bool subnormals = false) {
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) {
    const float v = (random_uniform(kSeed, stream, i) - 0.5f) * 100.0f;
    uint32_t u;
    std::memcpy(&u, &v, 4);
    const uint32_t sign = u & 0x80000000u;
    switch (i % 8) {
      case 0:
        break;  // random
      case 1:
        u = (u & 0xffff0000u) | 0x8000u;
        break;  // a tie
      case 2:
        u = (u & 0xffff0000u) | 0x8001u;
        break;  // just above a tie
      case 3:
        u = (u & 0xffff0000u) | 0x7fffu;
        break;  // just below a tie
      case 4:
        u = sign;
        break;  // ±0
      case 5:
        u = sign | 0x7f800000u;
        break;  // ±infinity
      case 6:
        u = sign | 0x7f7f0000u | (u & 0xffffu);
        break;  // near the largest finite value: rounds to it or to infinity
      case 7:
        if (subnormals) u = sign | (u & 0x007fffffu);
        break;
    }
    std::memcpy(t.data<float>() + i, &u, 4);
  }
  return t;
}

Tensor on_cpu(const Tensor& host) {
  Tensor t = cpu_ref().empty(host.shape(), host.dtype());
  cpu_ref().copy(t, host);
  return t;
}
Tensor on_gpu(const Tensor& host) {
  Tensor t = cuda_be().empty(host.shape(), host.dtype());
  cuda_be().copy(t, host);
  return t;
}
// A GPU buffer of all-ones bytes (a NaN in f32 and bf16): an element the op skips cannot pass.
Tensor gpu_poisoned(const Shape& s, DType dtype) {
  Tensor t = cuda_be().empty(s, dtype);
  Tensor h = Tensor::empty(s, dtype);
  std::memset(h.raw(), 0xff, h.bytes());
  cuda_be().copy(t, h);
  cuda_be().synchronize();
  return t;
}
Tensor to_host(const Tensor& device) {
  Tensor h = Tensor::empty(device.shape(), device.dtype());
  cuda_be().copy(h, device);
  cuda_be().synchronize();
  return h;
}

// Bit for bit (bf16, f32 or u8), naming the first differing element.
void expect_identical(const std::string& what, const Tensor& gpu_out, const Tensor& cpu_out) {
  const Tensor g = to_host(gpu_out);
  REQUIRE(g.bytes() == cpu_out.bytes());
  const size_t esize = dtype_size(g.dtype());
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    if (std::memcmp(static_cast<const char*>(g.raw()) + i * esize,
                    static_cast<const char*>(cpu_out.raw()) + i * esize, esize) != 0) {
      if (count++ == 0) first = i;
    }
  }
  std::cout << (count == 0 ? "  ok    " : "  FAIL  ") << what << ": " << count
            << " elements differ from the CPU's" << (count ? " (first " : "")
            << (count ? std::to_string(first) + ")" : "") << "\n";
  CHECK_MESSAGE(count == 0, what << ": " << count << " elements differ, first at " << first);
}

// The spacing of bf16 values at |v| (2^-7 of v's binade): one rounding step.
double bf16_ulp(float v) {
  if (v == 0.0f) return 0.0;
  int e = 0;
  std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 8);
}

// bf16 outputs computed in f32 by different code on each side and rounded once: each GPU
// element within one bf16 ulp of the CPU's (two f32 results a few f32 ulps apart round to the
// same value or to neighbours), plus `f32_rel` · max |cpu| for the f32 results' own difference
// (sums in other orders; it matters where values are small or cancel). NaNs only where the CPU
// has them.
void expect_close_bf16(const std::string& what, const Tensor& gpu_out, const Tensor& cpu_out,
                       double f32_rel) {
  const Tensor g = to_host(gpu_out);
  REQUIRE(g.numel() == cpu_out.numel());
  double max_ref = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const float cv = cpu::bf16_to_f32(cpu_out.data<bf16_t>()[i]);
    if (!std::isnan(cv)) max_ref = std::max(max_ref, std::fabs(static_cast<double>(cv)));
  }
  double worst_excess = 0;  // |gpu − cpu| over its bound, in bf16 ulps of the element
  int64_t nan_mismatch = 0, failures = 0, first = -1;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const float gv = cpu::bf16_to_f32(g.data<bf16_t>()[i]);
    const float cv = cpu::bf16_to_f32(cpu_out.data<bf16_t>()[i]);
    if (std::isnan(gv) || std::isnan(cv)) {
      nan_mismatch += std::isnan(gv) != std::isnan(cv);
      continue;
    }
    const double ulp = bf16_ulp(cv);
    const double diff = std::fabs(static_cast<double>(gv) - cv);
    const double bound = ulp + f32_rel * max_ref;
    if (diff > bound && failures++ == 0) first = i;
    if (ulp > 0) worst_excess = std::max(worst_excess, diff / ulp);
  }
  const bool ok = nan_mismatch == 0 && failures == 0;
  std::cout << (ok ? "  ok    " : "  FAIL  ") << what << ": largest difference " << worst_excess
            << " bf16 ulps (bound 1 ulp + " << f32_rel << " of max |cpu| " << max_ref << "), "
            << failures << " elements over it, NaN mismatches " << nan_mismatch << "\n";
  CHECK_MESSAGE(ok, what << ": " << failures << " elements over the bound (first " << first
                         << "), NaN mismatches " << nan_mismatch);
}

// f32 outputs (batch-norm statistics and parameter gradients): max |gpu − cpu| ≤ tolerance ·
// max |cpu|.
void expect_close_f32(const std::string& what, const Tensor& gpu_out, const Tensor& cpu_out,
                      double tolerance) {
  const Tensor g = to_host(gpu_out);
  REQUIRE(g.numel() == cpu_out.numel());
  double max_abs = 0, max_ref = 0;
  bool finite = true;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const float gv = g.data<float>()[i], cv = cpu_out.data<float>()[i];
    finite = finite && std::isfinite(gv) && std::isfinite(cv);
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(gv) - cv));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(cv)));
  }
  const double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
  const bool ok = finite && rel <= tolerance;
  std::cout << (ok ? "  ok    " : "  FAIL  ") << what << ": max rel error " << rel << " (tolerance "
            << tolerance << ")" << (finite ? "" : ", not finite") << "\n";
  CHECK_MESSAGE(ok, what << ": max rel error " << rel << (finite ? "" : ", not finite"));
}

// bf16 values without ties inside a plane: a permutation of the integers −plane/2 .. plane/2
// (exact in bf16 up to 256), so that max pooling's tie rule (cuDNN's against the CPU's first
// maximum) is never asked.
Tensor host_bf16_distinct(const Shape& s, uint64_t stream) {
  const int64_t plane = s[2] * s[3];
  REQUIRE(plane <= 256);
  Tensor t = Tensor::empty(s, DType::bf16);
  for (int64_t p = 0; p < s[0] * s[1]; ++p) {
    // A stride coprime with the plane size walks every integer once.
    int64_t step = 1 + static_cast<int64_t>(random_uniform(kSeed, stream, p) * (plane - 1));
    while (std::gcd(step, plane) != 1) ++step;
    for (int64_t q = 0; q < plane; ++q)
      t.data<bf16_t>()[p * plane + q] =
          cpu::f32_to_bf16(static_cast<float>((q * step + p) % plane - plane / 2));
  }
  return t;
}

// A CPU backend tensor as a plain host tensor (the CPU backend's memory is host memory).
Tensor to_host_cpu(const Tensor& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  std::memcpy(h.raw(), t.raw(), t.bytes());
  return h;
}

Tensor host_workspace(Backend& be, size_t bytes) {
  return be.empty({std::max<int64_t>(1, static_cast<int64_t>(bytes))}, DType::u8);
}

}  // namespace

TEST_CASE("cuda bf16: reorder casts f32 -> bf16 (nearest even) and back (exact) as the CPU does") {
  SKIP_WITHOUT_CPU_BF16();
  for (const int64_t n : {int64_t{1}, int64_t{1000}, int64_t{65537}}) {
    const Tensor f = host_f32_rounding_cases(n, 1);
    Tensor cpu_b = cpu_ref().empty({n}, DType::bf16);
    cpu_ref().reorder(cpu_b, 1, on_cpu(f), 1);
    Tensor gpu_b = gpu_poisoned({n}, DType::bf16);
    cuda_be().reorder(gpu_b, 1, on_gpu(f), 1);
    expect_identical("reorder f32 -> bf16, n = " + std::to_string(n), gpu_b, cpu_b);

    const Tensor b = host_bf16({n}, 2, 1000.0f);
    Tensor cpu_f = cpu_ref().empty({n});
    cpu_ref().reorder(cpu_f, 1, on_cpu(b), 1);
    Tensor gpu_f = gpu_poisoned({n}, DType::f32);
    cuda_be().reorder(gpu_f, 1, on_gpu(b), 1);
    expect_identical("reorder bf16 -> f32, n = " + std::to_string(n), gpu_f, cpu_f);
  }
  // Subnormals: the CPU's reorder (oneDNN's vcvtneps2bf16) flushes them to zero, its bf16
  // kernels (cpu::f32_to_bf16) round them to nearest even as any other value; CUDA's
  // conversion rounds them, so the reference here is f32_to_bf16.
  {
    const int64_t n = 4096;
    const Tensor f = host_f32_rounding_cases(n, 4, /*subnormals=*/true);
    Tensor expected = Tensor::empty({n}, DType::bf16);
    for (int64_t i = 0; i < n; ++i)
      expected.data<bf16_t>()[i] = cpu::f32_to_bf16(f.data<float>()[i]);
    Tensor gpu_b = gpu_poisoned({n}, DType::bf16);
    cuda_be().reorder(gpu_b, 1, on_gpu(f), 1);
    expect_identical("reorder f32 -> bf16 with subnormals (against f32_to_bf16)", gpu_b, expected);
  }
  // A 4-D activation (what the graph's casts reorder), plain layout.
  const Tensor f = host_f32_rounding_cases(2 * 3 * 5 * 7, 3).reshape({2, 3, 5, 7});
  Tensor cpu_b = cpu_ref().empty({2, 3, 5, 7}, DType::bf16);
  cpu_ref().reorder(cpu_b, 1, on_cpu(f), 1);
  Tensor gpu_b = gpu_poisoned({2, 3, 5, 7}, DType::bf16);
  cuda_be().reorder(gpu_b, 1, on_gpu(f), 1);
  expect_identical("reorder f32 -> bf16 [2, 3, 5, 7]", gpu_b, cpu_b);
}

TEST_CASE("cuda bf16: add and add_relu on three bf16 tensors match the CPU bit for bit") {
  SKIP_WITHOUT_CPU_BF16();
  const Shape s{3, 4, 9, 11};
  const Tensor a = host_bf16(s, 10), b = host_bf16(s, 11);
  for (const bool relu : {false, true}) {
    const std::string op = relu ? "add_relu" : "add";
    Tensor cpu_out = cpu_ref().empty(s, DType::bf16);
    Tensor gpu_out = gpu_poisoned(s, DType::bf16);
    const Tensor ga = on_gpu(a), gb = on_gpu(b);
    if (relu) {
      cpu_ref().add_relu(on_cpu(a), on_cpu(b), cpu_out);
      cuda_be().add_relu(ga, gb, gpu_out);
    } else {
      cpu_ref().add(on_cpu(a), on_cpu(b), cpu_out);
      cuda_be().add(ga, gb, gpu_out);
    }
    expect_identical(op + " bf16", gpu_out, cpu_out);
    // In place (out = a), as the graph's gradient sums do.
    if (relu)
      cuda_be().add_relu(ga, gb, ga);
    else
      cuda_be().add(ga, gb, ga);
    expect_identical(op + " bf16 in place", ga, cpu_out);
  }
  // Mixed dtypes are refused.
  const Tensor ga = on_gpu(a);
  Tensor f = cuda_be().empty(s);
  CHECK_THROWS(cuda_be().add(ga, ga, f));
}

TEST_CASE("cuda bf16: fill_zero clears bf16 tensors") {
  Tensor t = gpu_poisoned({1001}, DType::bf16);
  cuda_be().fill_zero(t);
  const Tensor h = to_host(t);
  int64_t nonzero = 0;
  for (int64_t i = 0; i < h.numel(); ++i) nonzero += h.data<bf16_t>()[i] != 0;
  CHECK(nonzero == 0);
}

TEST_CASE("cuda bf16: ReLU forward and backward match the CPU bit for bit") {
  SKIP_WITHOUT_CPU_BF16();
  const Shape s{4, 5, 6, 7};
  const Tensor x = host_bf16(s, 20), dy = host_bf16(s, 21);
  auto cpu_op = cpu_ref().make_relu(s, DType::bf16);
  auto gpu_op = cuda_be().make_relu(s, DType::bf16);
  Tensor cx = on_cpu(x), cy = cpu_ref().empty(s, DType::bf16);
  cpu_op->forward(cx, cy);
  Tensor gx = on_gpu(x), gy = gpu_poisoned(s, DType::bf16);
  gpu_op->forward(gx, gy);
  expect_identical("relu forward bf16", gy, cy);

  Tensor cdx = cpu_ref().empty(s, DType::bf16);
  cpu_op->backward(cx, cy, on_cpu(dy), cdx);
  Tensor gdx = gpu_poisoned(s, DType::bf16);
  gpu_op->backward(gx, gy, on_gpu(dy), gdx);
  expect_identical("relu backward bf16", gdx, cdx);

  // In place (y = x, dx = dy), as the graph runs a ReLU after a convolution.
  Tensor gx2 = on_gpu(x), gdy2 = on_gpu(dy);
  gpu_op->forward(gx2, gx2);
  expect_identical("relu forward bf16 in place", gx2, cy);
  gpu_op->backward(gx2, gx2, gdy2, gdy2);
  expect_identical("relu backward bf16 in place", gdy2, cdx);

  // An f32 tensor is refused by a bf16 op.
  Tensor f = cuda_be().empty(s);
  CHECK_THROWS(gpu_op->forward(f, f));
}

TEST_CASE("cuda bf16: GELU both forms against the CPU's within one bf16 ulp") {
  SKIP_WITHOUT_CPU_BF16();
  const Shape s{3, 17, 40};
  const Tensor x = host_bf16(s, 30, 10.0f), dy = host_bf16(s, 31);
  for (const auto form : {GeluApproximation::none, GeluApproximation::tanh}) {
    const std::string name = form == GeluApproximation::tanh ? "gelu tanh" : "gelu erf";
    const GeluSpec spec{s, form, DType::bf16};
    auto cpu_op = cpu_ref().make_gelu(spec);
    auto gpu_op = cuda_be().make_gelu(spec);
    Tensor cx = on_cpu(x), cy = cpu_ref().empty(s, DType::bf16);
    cpu_op->forward(cx, cy);
    Tensor gx = on_gpu(x), gy = gpu_poisoned(s, DType::bf16);
    gpu_op->forward(gx, gy);
    expect_close_bf16(name + " forward bf16", gy, cy, kGeluF32);

    Tensor cdx = cpu_ref().empty(s, DType::bf16);
    cpu_op->backward(cx, on_cpu(dy), cdx);
    Tensor gdx = gpu_poisoned(s, DType::bf16);
    gpu_op->backward(gx, on_gpu(dy), gdx);
    expect_close_bf16(name + " backward bf16", gdx, cdx, kGeluF32);
  }
}

TEST_CASE("cuda bf16: dropout keeps the CPU's elements and values bit for bit") {
  SKIP_WITHOUT_CPU_BF16();
  const Shape s{2, 33, 64};
  const Tensor x = host_bf16(s, 40), dy = host_bf16(s, 41);
  const DropoutSpec spec{s, 1, DType::bf16};
  auto cpu_op = cpu_ref().make_dropout(spec);
  auto gpu_op = cuda_be().make_dropout(spec);
  for (const float p : {0.1f, 0.5f, 1.0f}) {
    const std::string at = " p = " + std::to_string(p);
    Tensor cy = cpu_ref().empty(s, DType::bf16), cmask = cpu_ref().empty(s, DType::u8);
    cpu_op->forward(on_cpu(x), cy, cmask, p, 77, 5);
    Tensor gy = gpu_poisoned(s, DType::bf16), gmask = gpu_poisoned(s, DType::u8);
    gpu_op->forward(on_gpu(x), gy, gmask, p, 77, 5);
    expect_identical("dropout mask bf16" + at, gmask, cmask);
    expect_identical("dropout forward bf16" + at, gy, cy);

    Tensor cdx = cpu_ref().empty(s, DType::bf16);
    cpu_op->backward(on_cpu(dy), cmask, p, cdx);
    Tensor gdx = gpu_poisoned(s, DType::bf16);
    gpu_op->backward(on_gpu(dy), gmask, p, gdx);
    expect_identical("dropout backward bf16" + at, gdx, cdx);
  }
}

// Pooling: max pooling's output picks values (exact); a gradient routed to one input per window
// is exact too where windows do not overlap, and where they do, the f32 sums of up to 4 routed
// values may add in another order before the one rounding (one bf16 ulp). Averages are f32
// sums divided and rounded once, in cuDNN's order: one bf16 ulp. The ceil-mode case runs the own
// kernels, which repeat the CPU's loops (exact).
TEST_CASE("cuda bf16: max and average pooling against the CPU's") {
  SKIP_WITHOUT_CPU_BF16();
  struct Case {
    const char* name;
    int64_t kernel, stride, pad;
    bool ceil, overlap;
  };
  for (const Case& c :
       {Case{"2x2/2", 2, 2, 0, false, false}, Case{"3x3/2 pad 1", 3, 2, 1, false, true},
        Case{"3x3/2 ceil", 3, 2, 0, true, true}}) {
    for (const PoolKind kind : {PoolKind::max, PoolKind::avg}) {
      PoolSpec s;
      s.kind = kind;
      s.batch = 2, s.channels = 5, s.height = 12, s.width = 10;  // ceil: 6×5 against floor 5×4
      s.kernel_h = s.kernel_w = c.kernel;
      s.stride_h = s.stride_w = c.stride;
      s.pad_h = s.pad_w = c.pad;
      s.ceil_mode = c.ceil;
      s.dtype = DType::bf16;
      const std::string name =
          std::string(kind == PoolKind::max ? "max pool " : "avg pool ") + c.name + " bf16";
      const bool exact_grad = kind == PoolKind::max && (!c.overlap || c.ceil);
      const bool exact_y = kind == PoolKind::max || c.ceil;
      const Tensor x = host_bf16_distinct(s.input_shape(), 50);
      const Tensor dy = host_bf16(s.output_shape(), 51);
      auto cpu_op = cpu_ref().make_pool(s);
      auto gpu_op = cuda_be().make_pool(s);
      Tensor cws = host_workspace(cpu_ref(), cpu_op->workspace_bytes());
      Tensor gws = host_workspace(cuda_be(), gpu_op->workspace_bytes());
      Tensor cx = on_cpu(x), cy = cpu_ref().empty(s.output_shape(), DType::bf16);
      cpu_op->forward(cx, cy, cws, true);
      Tensor gx = on_gpu(x), gy = gpu_poisoned(s.output_shape(), DType::bf16);
      gpu_op->forward(gx, gy, gws, true);
      if (exact_y)
        expect_identical(name + " forward", gy, cy);
      else
        expect_close_bf16(name + " forward", gy, cy, kPoolAvgF32);

      Tensor cdx = cpu_ref().empty(s.input_shape(), DType::bf16);
      cpu_op->backward(cx, cy, on_cpu(dy), cws, cdx);
      Tensor gdx = gpu_poisoned(s.input_shape(), DType::bf16);
      gpu_op->backward(gx, gy, on_gpu(dy), gws, gdx);
      if (exact_grad)
        expect_identical(name + " backward", gdx, cdx);
      else
        expect_close_bf16(name + " backward", gdx, cdx, kPoolAvgF32);
    }
  }
}

// Batch norm: cuDNN against oneDNN, both reading bf16 and computing in f32. The f32 statistics
// sum the same values in other orders (1e-5 of max, as the f32 ops' test); y and dx are rounded
// once each, so one bf16 ulp plus the f32 results' difference (dx's cancellation: 2e-4);
// dscale and dshift are f32 sums over bf16 dy (1e-4).
TEST_CASE("cuda bf16: batch norm against the CPU's (f32 scale, shift and statistics)") {
  SKIP_WITHOUT_CPU_BF16();
  for (const bool relu : {false, true}) {
    for (const Shape& shape : {Shape{4, 6, 7, 5}, Shape{16, 10, 1, 1}}) {
      BatchNormSpec s;
      s.batch = shape[0], s.channels = shape[1], s.height = shape[2], s.width = shape[3];
      s.epsilon = 1e-5f;
      s.relu = relu;
      s.dtype = DType::bf16;
      const std::string name =
          std::string("batchnorm") + (relu ? "+relu " : " ") + shape.str() + " bf16";
      const Tensor x = host_bf16(shape, 60, 4.0f, 0.5f), dy = host_bf16(shape, 61);
      Tensor scale_h = Tensor::empty({s.channels}), shift_h = Tensor::empty({s.channels});
      for (int64_t c = 0; c < s.channels; ++c) {
        scale_h.data<float>()[c] = 0.5f + random_uniform(kSeed, 62, c);
        shift_h.data<float>()[c] = random_uniform(kSeed, 63, c) - 0.5f;
      }
      auto cpu_op = cpu_ref().make_batchnorm(s);
      auto gpu_op = cuda_be().make_batchnorm(s);
      Tensor cws = host_workspace(cpu_ref(), cpu_op->workspace_bytes());
      Tensor gws = host_workspace(cuda_be(), gpu_op->workspace_bytes());
      const Shape c1{s.channels};
      Tensor cx = on_cpu(x), cy = cpu_ref().empty(shape, DType::bf16);
      Tensor cmean = cpu_ref().empty(c1), cvar = cpu_ref().empty(c1);
      Tensor cscale = on_cpu(scale_h), cshift = on_cpu(shift_h);
      cpu_op->forward_training(cx, cscale, cshift, cy, cmean, cvar, cws);
      Tensor gx = on_gpu(x), gy = gpu_poisoned(shape, DType::bf16);
      Tensor gmean = gpu_poisoned(c1, DType::f32), gvar = gpu_poisoned(c1, DType::f32);
      Tensor gscale = on_gpu(scale_h), gshift = on_gpu(shift_h);
      gpu_op->forward_training(gx, gscale, gshift, gy, gmean, gvar, gws);
      expect_close_bf16(name + " y", gy, cy, kBatchNormF32);
      expect_close_f32(name + " mean", gmean, to_host_cpu(cmean), 1e-5);
      expect_close_f32(name + " variance", gvar, to_host_cpu(cvar), 1e-5);

      Tensor cdx = cpu_ref().empty(shape, DType::bf16);
      Tensor cdscale = cpu_ref().empty(c1), cdshift = cpu_ref().empty(c1);
      cpu_op->backward(cx, cy, on_cpu(dy), cscale, cmean, cvar, cws, cdx, cdscale, cdshift);
      Tensor gdx = gpu_poisoned(shape, DType::bf16);
      Tensor gdscale = gpu_poisoned(c1, DType::f32), gdshift = gpu_poisoned(c1, DType::f32);
      // The GPU backward reads the CPU's statistics, so that only the backward is compared.
      Tensor gmean_ref = on_gpu(to_host_cpu(cmean)), gvar_ref = on_gpu(to_host_cpu(cvar));
      gpu_op->backward(gx, gy, on_gpu(dy), gscale, gmean_ref, gvar_ref, gws, gdx, gdscale, gdshift);
      expect_close_bf16(name + " dx", gdx, cdx, kBatchNormGradF32);
      expect_close_f32(name + " dscale", gdscale, to_host_cpu(cdscale), 1e-4);
      expect_close_f32(name + " dshift", gdshift, to_host_cpu(cdshift), 1e-4);

      Tensor cyi = cpu_ref().empty(shape, DType::bf16);
      cpu_op->forward_inference(cx, cscale, cshift, cmean, cvar, cyi);
      Tensor gyi = gpu_poisoned(shape, DType::bf16);
      gpu_op->forward_inference(gx, gscale, gshift, gmean_ref, gvar_ref, gyi);
      expect_close_bf16(name + " inference y", gyi, cyi, kBatchNormF32);
    }
  }
}

// Attention: both sides widen the same bf16 qkv and dy and compute in f32 (other kernels, other
// sum orders: the f32 ops agree within 2e-5 of max for y and 5e-5 for dqkv against double), then
// round y and dqkv once: one bf16 ulp plus those f32 differences, doubled. lse is f32 on both
// sides. Dropout draws the same weights (the same indices); were it not so, y would differ by
// whole weights. The backward on both sides reads the CPU's y and lse, so that it is compared
// alone. Head dimensions 32 and 80 run the 64- and 128-wide tiles; T = 100 two tiles and a tail.
TEST_CASE("cuda bf16: attention against the CPU's (f32 lse and workspace)") {
  SKIP_WITHOUT_CPU_BF16();
  struct Case {
    int64_t N, T, H, D;
    float dropout;
  };
  for (const Case& c :
       {Case{2, 100, 3, 32, 0.0f}, Case{2, 100, 3, 32, 0.2f}, Case{1, 70, 2, 80, 0.0f}}) {
    AttentionSpec spec{c.N, c.T, c.H, c.D, c.dropout};
    spec.dtype = DType::bf16;
    const int64_t C = c.H * c.D;
    const std::string name = "attention N=" + std::to_string(c.N) + " T=" + std::to_string(c.T) +
                             " H=" + std::to_string(c.H) + " D=" + std::to_string(c.D) +
                             " dropout " + std::to_string(c.dropout) + " bf16";
    auto cpu_op = cpu_ref().make_attention(spec);
    auto gpu_op = cuda_be().make_attention(spec);
    const Tensor qkv = host_bf16({c.N, c.T, 3 * C}, 70, 4.0f);
    const Tensor dy = host_bf16({c.N, c.T, C}, 71, 1.0f);
    const uint64_t seed = 17, stream = 99;
    Tensor cws = host_workspace(cpu_ref(), cpu_op->workspace_bytes());
    Tensor gws = host_workspace(cuda_be(), gpu_op->workspace_bytes());

    Tensor cqkv = on_cpu(qkv), cy = cpu_ref().empty({c.N, c.T, C}, DType::bf16);
    Tensor clse = cpu_ref().empty({c.N, c.H, c.T});
    cpu_op->forward(cqkv, cy, clse, cws, true, seed, stream);
    Tensor gqkv = on_gpu(qkv), gy = gpu_poisoned({c.N, c.T, C}, DType::bf16);
    Tensor glse = gpu_poisoned({c.N, c.H, c.T}, DType::f32);
    gpu_op->forward(gqkv, gy, glse, gws, true, seed, stream);
    expect_close_bf16(name + " y", gy, cy, kAttentionF32);
    expect_close_f32(name + " lse", glse, to_host_cpu(clse), kAttentionF32);

    Tensor cdqkv = cpu_ref().empty({c.N, c.T, 3 * C}, DType::bf16);
    cpu_op->backward(cqkv, cy, on_cpu(dy), clse, cws, seed, stream, cdqkv);
    Tensor gdqkv = gpu_poisoned({c.N, c.T, 3 * C}, DType::bf16);
    gpu_op->backward(gqkv, on_gpu(to_host_cpu(cy)), on_gpu(dy), on_gpu(to_host_cpu(clse)), gws,
                     seed, stream, gdqkv);
    expect_close_bf16(name + " dqkv", gdqkv, cdqkv, kAttentionGradF32);
  }
}
