// The CUDA Linear and Conv2d in bf16 (spec.dtype) against the CPU backend's bf16 ops, the
// reference: the same specs, the same bf16 inputs (x, dy) and f32 weights that are already
// bf16-exact, so both sides multiply the same bf16 values exactly and accumulate in f32 and
// differ only in the order of their sums and where that order moves a rounding.
// The error of an output is max |gpu − cpu| / max |cpu| over its elements (as
// test_cuda_ops.cpp). Outputs start as NaN, so an element the op does not write cannot pass.
// Runs in the test_cuda_ops binary: skipped without a GPU (cuda_test_main.cpp).
#include <doctest/doctest.h>

#include <algorithm>  // clamp, max
#include <cmath>      // fabs, isfinite, isnan, sqrt
#include <cstdint>
#include <cstdlib>     // getenv, setenv, unsetenv: DTRAIN_CONV_ALGO
#include <functional>  // function: one case, caught
#include <iomanip>     // setprecision
#include <iostream>
#include <limits>  // quiet_NaN
#include <optional>
#include <sstream>
#include <string>
#include <thread>  // hardware_concurrency

#include "backend/backend.h"            // make_backend: the CPU reference
#include "backend/cpu/bf16.h"           // bf16_t, f32_to_bf16, bf16_to_f32, round_to_bf16
#include "backend/cuda/cuda_backend.h"  // make_cuda_backend
#include "core/rng.h"                   // random_normal
#include "cuda_test_backends.h"         // the one CPU reference and GPU of the binary

using namespace dtrain;
using dtrain::cpu::bf16_t, dtrain::cpu::bf16_to_f32, dtrain::cpu::f32_to_bf16,
    dtrain::cpu::round_to_bf16;

namespace {

constexpr uint64_t kSeed = 2026;

// Tolerances: max |gpu − cpu| / max |cpu| of one output.
namespace tol {
// A bf16 output (y, dx): the f32 sums agree to ~1e-6, but where they straddle a rounding
// boundary the two sides store neighbouring bf16 values, one bf16 ulp apart. bf16 keeps 8
// significant bits, so one ulp of an element is 2⁻⁸ to 2⁻⁷ of its magnitude: 2⁻⁷ of max |cpu|
// bounds it (2⁻⁸, half an ulp, would fail on any flipped element whose mantissa is near 1).
constexpr double bf16_out = 1.0 / 128;
// The CUDA conv adds the bias to cuDNN's rounded bf16 output and rounds again (the CPU rounds
// once after the bias): up to half an ulp more.
constexpr double bf16_out_conv_bias = 1.5 / 128;
// f32 dw and db: exact bf16 products summed in f32 in another order, as the f32 tests' GEMMs.
constexpr double linear_grad = 5e-5;
constexpr double conv_grad = 2e-4;  // DTRAIN_CONV_ALGO=direct: GEMM-like algorithms only
}  // namespace tol

Backend& cpu() {
  return cuda_test::cpu_reference();
}
Backend& gpu() {
  return cuda_test::gpu();
}

uint64_t fresh_stream() {
  static uint64_t stream = 0;
  return ++stream;
}

// scale·N(0, 1) rounded to bf16: an f32 host tensor of bf16-exact values (the weights).
Tensor host_f32_bf16_exact(const Shape& shape, float scale) {
  Tensor t = Tensor::empty(shape);
  const uint64_t stream = fresh_stream();
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = round_to_bf16(scale * random_normal(kSeed, stream, static_cast<uint64_t>(i)));
  return t;
}

// scale·N(0, 1) as a bf16 host tensor (activations and their gradients).
Tensor host_bf16(const Shape& shape, float scale = 1.0f) {
  Tensor t = Tensor::empty(shape, DType::bf16);
  const uint64_t stream = fresh_stream();
  auto* p = t.data<bf16_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = f32_to_bf16(scale * random_normal(kSeed, stream, static_cast<uint64_t>(i)));
  return t;
}

Tensor host_zeros(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  std::fill_n(static_cast<unsigned char*>(t.raw()), t.bytes(), 0);
  return t;
}

Tensor to_gpu(const Tensor& host) {
  Tensor d = gpu().empty(host.shape(), host.dtype());
  gpu().copy(d, host);
  return d;
}

Tensor to_host(const Tensor& device) {
  Tensor h = Tensor::empty(device.shape(), device.dtype());
  gpu().copy(h, device);
  gpu().synchronize();
  return h;
}

// A GPU buffer of NaN in `dtype` (bf16 NaN: 0x7FC0).
Tensor gpu_nans(const Shape& shape, DType dtype) {
  Tensor h = Tensor::empty(shape, dtype);
  if (dtype == DType::bf16)
    std::fill_n(h.data<bf16_t>(), h.numel(), bf16_t{0x7FC0});
  else
    std::fill_n(h.data<float>(), h.numel(), std::numeric_limits<float>::quiet_NaN());
  return to_gpu(h);
}

float value_at(const Tensor& host, int64_t i) {
  return host.dtype() == DType::bf16 ? bf16_to_f32(host.data<bf16_t>()[i]) : host.data<float>()[i];
}

std::string num(double v) {
  std::ostringstream s;
  s << std::setprecision(3) << std::scientific << v;
  return s.str();
}

// max |gpu − cpu| ≤ tolerance · max |cpu|, both in the output's dtype; a NaN (an unwritten
// element) or an infinity fails unless both sides have it.
void expect_close(const std::string& op, const std::string& output, const Tensor& gpu_out,
                  const Tensor& cpu_out, double tolerance) {
  const Tensor got = to_host(gpu_out);
  REQUIRE(got.dtype() == cpu_out.dtype());
  REQUIRE(got.numel() == cpu_out.numel());
  double max_abs = 0, max_ref = 0;
  int64_t worst = -1, special = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = value_at(got, i), c = value_at(cpu_out, i);
    if (!std::isfinite(g) || !std::isfinite(c)) {
      special += !(g == c || (std::isnan(g) && std::isnan(c)));
      continue;
    }
    const double d = std::fabs(static_cast<double>(g) - c);
    if (d > max_abs || worst < 0) max_abs = d, worst = i;
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(c)));
  }
  const double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
  const bool ok = special == 0 && rel <= tolerance;
  std::string line = op + "  " + output + ": max rel error " + num(rel) + " (tolerance " +
                     num(tolerance) + ", max |cpu| " + num(max_ref) + ")";
  if (special > 0) line += "; " + std::to_string(special) + " NaN/Inf mismatches";
  if (!ok && worst >= 0)
    line += "; worst [" + std::to_string(worst) + "]: gpu " + num(value_at(got, worst)) + ", cpu " +
            num(value_at(cpu_out, worst));
  std::cout << (ok ? "  ok    " : "  FAIL  ") << line << "\n";
  CHECK_MESSAGE(ok, line);
}

void run_case(const std::string& what, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    const std::string line = what + ": threw: " + e.what();
    std::cout << "  FAIL  " << line << "\n";
    CHECK_MESSAGE(false, line);
  }
}

// Sets DTRAIN_CONV_ALGO for the ops built in its scope (the CUDA conv reads it when built).
class ConvAlgoScope {
 public:
  explicit ConvAlgoScope(const char* value) {
    if (const char* old = std::getenv("DTRAIN_CONV_ALGO")) old_ = old;
    ::setenv("DTRAIN_CONV_ALGO", value, 1);
  }
  ~ConvAlgoScope() {
    if (old_)
      ::setenv("DTRAIN_CONV_ALGO", old_->c_str(), 1);
    else
      ::unsetenv("DTRAIN_CONV_ALGO");
  }
  ConvAlgoScope(const ConvAlgoScope&) = delete;
  ConvAlgoScope& operator=(const ConvAlgoScope&) = delete;

 private:
  std::optional<std::string> old_;
};

std::string name_of(const LinearSpec& s) {
  return "bf16 linear " + std::to_string(s.batch) + "x" + std::to_string(s.in_features) + "→" +
         std::to_string(s.out_features) + (s.bias ? "" : " nobias") + (s.relu ? " +relu" : "");
}
std::string name_of(const ConvSpec& s) {
  std::ostringstream o;
  o << "bf16 conv " << s.batch << "x" << s.in_channels << "x" << s.height << "x" << s.width << "→"
    << s.out_channels << " k" << s.kernel_h << "x" << s.kernel_w << " s" << s.stride_h << " p"
    << s.pad_h << (s.bias ? "" : " nobias") << (s.relu ? " +relu" : "");
  return o.str();
}

// Forward, backward_data and backward_weights of one op on both backends. The forward runs
// twice on the GPU op, first on other weights: the second call must convert the weights it is
// given (never a copy kept from the first). The backward passes of both backends read the
// CPU's forward output, so that a fused ReLU masks the same elements.
template <typename Spec, typename Make>
void check_op(const Spec& s, const Shape& xs, const Shape& ys, const Shape& ws, int64_t fan_in,
              const Shape& bs, Make make, double y_tol, double grad_tol) {
  const std::string op = name_of(s);
  run_case(op, [&] {
    auto cop = make(cpu(), s);
    auto gop = make(gpu(), s);
    const Tensor none;
    const float w_scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
    const Tensor x = host_bf16(xs);
    const Tensor w = host_f32_bf16_exact(ws, w_scale);
    const Tensor other_w = host_f32_bf16_exact(ws, w_scale);
    const Tensor b = host_f32_bf16_exact(bs, 0.5f);
    const Tensor gx = to_gpu(x), gw = to_gpu(w), gother_w = to_gpu(other_w), gb = to_gpu(b);

    Tensor y = host_zeros(ys, DType::bf16), gy = gpu_nans(ys, DType::bf16);
    cop->forward(x, w, s.bias ? b : none, y);
    gop->forward(gx, gother_w, s.bias ? gb : none, gy);
    gop->forward(gx, gw, s.bias ? gb : none, gy);
    expect_close(op, "y", gy, y, y_tol);

    const Tensor dy = host_bf16(ys);
    const Tensor gdy = to_gpu(dy), gy_cpu = to_gpu(y);
    const Tensor y_in = s.relu ? y : none;  // read only with a fused ReLU
    const Tensor gy_in = s.relu ? gy_cpu : none;
    Tensor dx = host_zeros(xs, DType::bf16), gdx = gpu_nans(xs, DType::bf16);
    cop->backward_data(y_in, dy, w, dx);
    gop->backward_data(gy_in, gdy, gother_w, gdx);
    gop->backward_data(gy_in, gdy, gw, gdx);
    expect_close(op, "dx", gdx, dx, tol::bf16_out);

    Tensor dw = host_zeros(ws, DType::f32), gdw = gpu_nans(ws, DType::f32);
    Tensor db = host_zeros(bs, DType::f32), gdb = gpu_nans(bs, DType::f32);
    cop->backward_weights(x, y_in, dy, dw, s.bias ? db : none);
    gop->backward_weights(gx, gy_in, gdy, gdw, s.bias ? gdb : none);
    expect_close(op, "dw (f32)", gdw, dw, grad_tol);
    if (s.bias) expect_close(op, "db (f32)", gdb, db, grad_tol);
  });
}

bool cpu_has_bf16() {
  const std::string why = cpu().bf16_unavailable();
  if (!why.empty()) MESSAGE("skipped: the CPU reference has no bf16 here: " << why);
  return why.empty();
}

}  // namespace

TEST_CASE("cuda bf16 linear: forward, backward_data, backward_weights against the CPU's bf16") {
  if (!cpu_has_bf16()) return;
  const LinearSpec shapes[] = {
      {100, 784, 500}, {32, 2304, 512}, {33, 129, 65}, {7, 13, 5}, {1, 17, 3},
  };
  for (LinearSpec s : shapes)
    for (bool bias : {true, false})
      for (bool relu : {false, true}) {
        s.bias = bias, s.relu = relu, s.dtype = DType::bf16;
        const auto make = [](Backend& be, const LinearSpec& spec) { return be.make_linear(spec); };
        check_op(s, {s.batch, s.in_features}, {s.batch, s.out_features},
                 {s.out_features, s.in_features}, s.in_features, {s.out_features}, make,
                 tol::bf16_out, tol::linear_grad);
      }
}

TEST_CASE("cuda bf16 conv2d: 1x1, 3x3, strided, a 5x5 stem against the CPU's bf16") {
  if (!cpu_has_bf16()) return;
  const ConvAlgoScope algo("direct");
  // batch, in, H, W, out, kh, kw, sh, sw, ph, pw
  const ConvSpec shapes[] = {
      {4, 64, 14, 14, 128, 1, 1, 1, 1, 0, 0},  // 1x1
      {4, 32, 16, 16, 48, 3, 3, 1, 1, 1, 1},   // 3x3 pad 1
      {4, 64, 28, 28, 128, 3, 3, 2, 2, 1, 1},  // 3x3 stride 2 pad 1
      {2, 3, 32, 32, 16, 5, 5, 1, 1, 2, 2},    // a 5x5 stem on 3 channels
      {3, 5, 9, 7, 6, 3, 3, 1, 1, 0, 0},       // odd sizes, no padding
  };
  for (ConvSpec s : shapes)
    for (bool bias : {true, false})
      for (bool relu : {false, true}) {
        s.bias = bias, s.relu = relu, s.dtype = DType::bf16;
        const auto make = [](Backend& be, const ConvSpec& spec) { return be.make_conv(spec); };
        check_op(s, s.input_shape(), s.output_shape(), s.weight_shape(),
                 s.in_channels * s.kernel_h * s.kernel_w, {s.out_channels}, make,
                 bias ? tol::bf16_out_conv_bias : tol::bf16_out, tol::conv_grad);
      }
}

TEST_CASE("cuda bf16 linear and conv2d refuse f32 activations and bf16 weights") {
  if (!cpu_has_bf16()) return;
  LinearSpec s{4, 8, 3, true, false};
  s.dtype = DType::bf16;
  auto op = gpu().make_linear(s);
  const Tensor x16 = to_gpu(host_bf16({4, 8})), x32 = gpu().empty({4, 8});
  const Tensor w32 = gpu().empty({3, 8}), w16 = to_gpu(host_bf16({3, 8}));
  const Tensor b = gpu().empty({3}), y = gpu().empty({4, 3}, DType::bf16);
  CHECK_THROWS(op->forward(x32, w32, b, y));  // x in f32
  CHECK_THROWS(op->forward(x16, w16, b, y));  // weights in bf16
}
