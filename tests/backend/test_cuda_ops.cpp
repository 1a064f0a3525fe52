// Every operation of the CUDA backend against the CPU backend, the reference (docs/architecture.md,
// decision 2), in the manner of ggml's test-backend-ops: the same random inputs go to both backends
// and each output, forward and backward, is compared with a tolerance per op. The error of an
// output is max |gpu − cpu| / max |cpu| over its elements: a wrong index, a missing term or a wrong
// formula shows as O(1e-3) or more, float rounding as O(1e-6). Every comparison prints one line
// (op, shape, output, error, tolerance); a failure also names the worst element. GPU outputs start
// as NaN, so an element the op does not write cannot pass. TF32 is off (make_cuda_backend(0,
// false)), and one case checks that it is. Without a usable GPU the binary runs nothing and exits
// 77: skipped (cuda_test_main.cpp).
#include <doctest/doctest.h>

#include <algorithm>   // max, min
#include <bit>         // bit_cast
#include <chrono>      // steady_clock: the informational timing of attention
#include <cmath>       // fabs, isfinite, isnan, sqrt
#include <cstdint>     // int64_t, uint8_t, uint32_t
#include <cstdlib>     // getenv, setenv, unsetenv: DTRAIN_CONV_ALGO
#include <cstring>     // memcmp, memcpy, memset
#include <functional>  // function: one case, caught
#include <iomanip>     // setprecision
#include <iostream>    // one line per comparison
#include <limits>      // quiet_NaN
#include <optional>
#include <sstream>
#include <string>
#include <thread>  // hardware_concurrency: the reference's threads
#include <vector>

#include "backend/backend.h"            // make_backend: the CPU reference
#include "backend/cuda/cuda_backend.h"  // make_cuda_backend
#include "core/rng.h"                   // random_normal, random_bits, stream_id
#include "cuda_test_backends.h"         // the one CPU reference and GPU of the binary
#include "optim/adamw.h"                // AdamWOptions
#include "optim/lion.h"                 // LionOptions
#include "optim/optimizer_table.h"      // optimizers, make_optimizer: every row
#include "optim/sgd.h"                  // SgdOptions, sgd_step_accumulate
#include "optim/weight_prediction.h"    // WeightPrediction, GradientSum
#include "reference_ops.h"              // ref_gelu: the double reference

using namespace dtrain;

namespace {

constexpr uint64_t kSeed = 2024;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Tolerances: max |gpu − cpu| / max |cpu| of one output.
namespace tol {
constexpr double linear = 5e-5;           // cuBLAS vs oneDNN GEMMs: other summation orders
constexpr double conv = 2e-4;             // DTRAIN_CONV_ALGO=direct: GEMM-like algorithms only
constexpr double conv_transforms = 3e-2;  // cuDNN's FFT and non-fused Winograd: up to 1.2e-2
constexpr double pool_avg = 1e-5;         // max pooling's output is compared exactly
constexpr double pool_max_grad = 1e-6;    // overlapping windows sum routed gradients in any order
constexpr double lrn = 1e-5;
constexpr double lrn_grad = 1e-4;
constexpr double bn = 1e-5;            // y, batch mean and variance, inference y
constexpr double bn_grad = 1e-4;       // dx cancels: dy − mean(dy) − x̂·mean(dy·x̂)
constexpr double softmax = 1e-5;       // probabilities
constexpr double softmax_loss = 2e-5;  // a float sum over the rows on the GPU
constexpr double softmax_grad = 1e-6;
// GELU: CUDA's erff/tanhf/expf and oneDNN's polynomials are each a few float ulps off; a wrong
// form (tanh for erf) is 4.7e-4 off near |x| = 2. Against the CPU op: of max |cpu| as above;
// against the double reference: |gpu − ref| ≤ gelu_ref · (1 + |ref|) per element.
constexpr double gelu = 1e-5;
constexpr double gelu_grad = 1e-5;
constexpr double gelu_ref = 1e-5;
// Layer norm and attention against double: float sums over up to 1024 terms; a wrong term or
// index is O(1e-2) off.
constexpr double layer_norm = 1e-5;
constexpr double layer_norm_grad = 2e-5;
constexpr double attention = 2e-5;
constexpr double attention_grad = 5e-5;
constexpr double tf32_probe = 1e-5;  // exact in fp32; TF32 would be off by 2.4e-4
}  // namespace tol

// ---- the two backends ----------------------------------------------------------------------

// The binary's one pair (cuda_test_backends.h).
Backend& cpu() {
  return cuda_test::cpu_reference();
}
Backend& gpu() {
  return cuda_test::gpu();
}

// ---- tensors -------------------------------------------------------------------------------

uint64_t fresh_stream() {
  static uint64_t stream = 0;
  return ++stream;
}

// A host tensor of offset + scale·N(0, 1), from a random stream of its own.
Tensor host_normal(const Shape& shape, float scale = 1.0f, float offset = 0.0f) {
  Tensor t = Tensor::empty(shape);
  const uint64_t stream = fresh_stream();
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = offset + scale * random_normal(kSeed, stream, static_cast<uint64_t>(i));
  return t;
}

Tensor host_filled(const Shape& shape, float value) {
  Tensor t = Tensor::empty(shape);
  std::fill(t.data<float>(), t.data<float>() + t.numel(), value);
  return t;
}

// A host tensor of random bytes (for f32: any bit pattern, NaN payloads included).
Tensor host_bits(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  const uint64_t stream = fresh_stream();
  auto* p = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.bytes(); ++i)
    p[i] = static_cast<unsigned char>(random_bits(kSeed, stream, i));
  return t;
}

Tensor copy_of(const Tensor& host) {
  Tensor t = Tensor::empty(host.shape(), host.dtype());
  std::memcpy(t.raw(), host.raw(), host.bytes());
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

// A GPU output buffer of NaN: an element the op leaves unwritten cannot pass.
Tensor gpu_nans(const Shape& shape) {
  Tensor d = gpu().empty(shape);
  gpu().fill(d, kNaN);
  return d;
}

// What WorkspacePlans (nn/layer.h) passes: `bytes` of scratch, or nothing.
Tensor workspace(Backend& backend, size_t bytes) {
  return bytes > 0 ? backend.empty({static_cast<int64_t>(bytes)}, DType::u8) : Tensor();
}

// ---- comparisons ---------------------------------------------------------------------------

std::string num(double v) {
  std::ostringstream s;
  s << std::setprecision(3) << std::scientific << v;
  return s.str();
}
std::string fnum(float v) {
  std::ostringstream s;
  s << std::setprecision(9) << v;
  return s.str();
}

void report(bool ok, const std::string& line) {
  std::cout << (ok ? "  ok    " : "  FAIL  ") << line << "\n";
  CHECK_MESSAGE(ok, line);
}

// Runs one case; an exception (a CUDA error, a spec the op rejects) fails that case only.
void run_case(const std::string& what, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    report(false, what + ": threw: " + e.what());
  }
}

// max |gpu − cpu| ≤ tolerance · max |cpu|; a NaN or an infinity must be on both sides.
void expect_close(const std::string& op, const std::string& output, const Tensor& gpu_out,
                  const Tensor& cpu_out, double tolerance) {
  const Tensor got = to_host(gpu_out);
  REQUIRE(got.numel() == cpu_out.numel());
  const float* g = got.data<float>();
  const float* c = cpu_out.data<float>();
  double max_abs = 0, max_ref = 0;
  int64_t worst = -1, special = 0, first_special = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (!std::isfinite(g[i]) || !std::isfinite(c[i])) {
      if (!(g[i] == c[i] || (std::isnan(g[i]) && std::isnan(c[i])))) {
        if (special++ == 0) first_special = i;
      }
      continue;
    }
    const double d = std::fabs(static_cast<double>(g[i]) - c[i]);
    if (d > max_abs || worst < 0) max_abs = d, worst = i;
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(c[i])));
  }
  const double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
  const bool ok = special == 0 && rel <= tolerance;
  std::string line = op + "  " + output + ": max rel error " + num(rel) + " (tolerance " +
                     num(tolerance) + ", max |cpu| " + num(max_ref) + ")";
  if (special > 0)
    line += "; " + std::to_string(special) + " NaN/Inf mismatches, first [" +
            std::to_string(first_special) + "]: gpu " + fnum(g[first_special]) + ", cpu " +
            fnum(c[first_special]);
  if (!ok && worst >= 0)
    line += "; worst [" + std::to_string(worst) + "]: gpu " + fnum(g[worst]) + ", cpu " +
            fnum(c[worst]);
  report(ok, line);
}

// Identical values: f32 bit for bit except that +0 equals −0; other dtypes byte for byte.
void expect_equal(const std::string& op, const std::string& output, const Tensor& gpu_out,
                  const Tensor& cpu_out) {
  const Tensor got = to_host(gpu_out);
  REQUIRE(got.bytes() == cpu_out.bytes());
  int64_t bad = 0, first = -1, n = 0;
  std::string values;
  if (got.dtype() == DType::f32) {
    const float* g = got.data<float>();
    const float* c = cpu_out.data<float>();
    n = got.numel();
    for (int64_t i = 0; i < n; ++i)
      if (!(g[i] == c[i] || std::bit_cast<uint32_t>(g[i]) == std::bit_cast<uint32_t>(c[i])))
        if (bad++ == 0) first = i, values = "gpu " + fnum(g[i]) + ", cpu " + fnum(c[i]);
  } else {
    const auto* g = static_cast<const unsigned char*>(got.raw());
    const auto* c = static_cast<const unsigned char*>(cpu_out.raw());
    n = static_cast<int64_t>(got.bytes());
    for (int64_t i = 0; i < n; ++i)
      if (g[i] != c[i])
        if (bad++ == 0)
          first = i, values = "gpu " + std::to_string(g[i]) + ", cpu " + std::to_string(c[i]);
  }
  report(bad == 0,
         op + "  " + output + ": " +
             (bad == 0 ? "identical (" + std::to_string(n) + " elements)"
                       : std::to_string(bad) + " of " + std::to_string(n) + " differ, first [" +
                             std::to_string(first) + "]: " + values));
}

// |gpu − cpu| ≤ ulps · 2⁻²³ · scale[i], where scale[i] bounds the magnitudes of the terms that
// element was computed from. The CPU's loops may be contracted into FMAs (GCC does at
// -march=native) while the GPU kernels round every multiply and add (-fmad=false): the two
// then differ by about an ulp of the terms, which is more than an ulp of a result that
// cancelled. Bit-identical elements are counted for information.
void expect_within_ulps(const std::string& op, const std::string& output, const Tensor& gpu_out,
                        const Tensor& cpu_out, const std::vector<double>& scale, double ulps) {
  const Tensor got = to_host(gpu_out);
  REQUIRE(got.numel() == cpu_out.numel());
  REQUIRE(static_cast<int64_t>(scale.size()) == got.numel());
  const float* g = got.data<float>();
  const float* c = cpu_out.data<float>();
  constexpr double kUlp = 1.0 / 8388608.0;  // 2⁻²³
  int64_t bad = 0, first = -1, identical = 0;
  double worst = 0;  // in ulps of the terms
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::bit_cast<uint32_t>(g[i]) == std::bit_cast<uint32_t>(c[i])) {
      ++identical;
      continue;
    }
    const double d = std::fabs(static_cast<double>(g[i]) - c[i]);
    const double in_ulps = scale[i] > 0 ? d / (kUlp * scale[i]) : (d > 0 ? 1e30 : 0);
    worst = std::max(worst, std::isnan(d) ? 1e30 : in_ulps);
    if (!(in_ulps <= ulps))
      if (bad++ == 0) first = i;
  }
  std::string line = op + "  " + output + ": " + std::to_string(identical) + " of " +
                     std::to_string(got.numel()) + " bit-identical, worst " + num(worst) +
                     " ulps of the terms (allowed " + num(ulps) + ")";
  if (bad > 0)
    line += "; " + std::to_string(bad) + " outside, first [" + std::to_string(first) + "]: gpu " +
            fnum(g[first]) + ", cpu " + fnum(c[first]);
  report(bad == 0, line);
}

// The elements of a GPU buffer from `from` on are still the NaN they started as.
void expect_untouched(const std::string& op, const std::string& what, const Tensor& gpu_buffer,
                      int64_t from) {
  const Tensor h = to_host(gpu_buffer);
  int64_t written = 0;
  for (int64_t i = from; i < h.numel(); ++i) written += !std::isnan(h.data<float>()[i]);
  report(written == 0, op + "  " + what + ": " + std::to_string(written) + " of " +
                           std::to_string(h.numel() - from) + " elements written");
}

// ---- spec names ----------------------------------------------------------------------------

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d) {
    if (!s.empty()) s += 'x';
    s += std::to_string(v);
  }
  return s;
}

std::string name_of(const LinearSpec& s) {
  return "linear " + dims({s.batch, s.in_features}) + "→" + std::to_string(s.out_features) +
         (s.bias ? "" : " nobias") + (s.relu ? " +relu" : "");
}
std::string name_of(const ConvSpec& s) {
  return "conv " + dims({s.batch, s.in_channels, s.height, s.width}) + "→" +
         std::to_string(s.out_channels) + " k" + dims({s.kernel_h, s.kernel_w}) + " s" +
         dims({s.stride_h, s.stride_w}) + " p" + dims({s.pad_h, s.pad_w}) +
         (s.bias ? "" : " nobias") + (s.relu ? " +relu" : "");
}
std::string name_of(const PoolSpec& s) {
  return std::string(s.kind == PoolKind::max ? "maxpool " : "avgpool ") +
         dims({s.batch, s.channels, s.height, s.width}) + " k" + dims({s.kernel_h, s.kernel_w}) +
         " s" + dims({s.stride_h, s.stride_w}) + " p" + dims({s.pad_h, s.pad_w}) +
         (s.ceil_mode ? " ceil" : "") +
         (s.kind == PoolKind::avg ? (s.avg_include_padding ? " incl-pad" : " excl-pad") : "");
}
std::string name_of(const LrnSpec& s) {
  std::ostringstream o;
  o << "lrn " << dims({s.batch, s.channels, s.height, s.width}) << " size " << s.size << " alpha "
    << s.alpha << " beta " << s.beta << " k " << s.k;
  return o.str();
}
std::string name_of(const BatchNormSpec& s) {
  return "batchnorm " +
         (s.height == 1 && s.width == 1 ? dims({s.batch, s.channels})
                                        : dims({s.batch, s.channels, s.height, s.width})) +
         " eps " + num(s.epsilon) + (s.relu ? " +relu" : "");
}

// ---- Linear --------------------------------------------------------------------------------

// Forward, backward_data and backward_weights on the same inputs. The backward passes of both
// backends get the CPU's forward output, so that a fused ReLU masks the same elements. With
// buffer_batch > spec.batch the op runs on the first rows of larger buffers (as a layer's
// smaller last batch would) and must leave the other rows alone.
void check_linear(const LinearSpec& s, int64_t buffer_batch) {
  const std::string op =
      name_of(s) + (buffer_batch > s.batch
                        ? " (rows of a batch-" + std::to_string(buffer_batch) + " buffer)"
                        : "");
  run_case(op, [&] {
    const int64_t B = s.batch, I = s.in_features, O = s.out_features;
    auto cop = cpu().make_linear(s);
    auto gop = gpu().make_linear(s);
    const Tensor none;
    const Tensor x = host_normal({buffer_batch, I});
    const Tensor w = host_normal({O, I}, 1.0f / std::sqrt(static_cast<float>(I)));
    const Tensor b = host_normal({O}, 0.5f);
    const Tensor gx = to_gpu(x), gw = to_gpu(w), gb = to_gpu(b);

    Tensor y = Tensor::zeros({buffer_batch, O}), gy = gpu_nans({buffer_batch, O});
    cop->forward(x.narrow_batch(B), w, s.bias ? b : none, y.narrow_batch(B));
    gop->forward(gx.narrow_batch(B), gw, s.bias ? gb : none, gy.narrow_batch(B));
    expect_close(op, "y", gy.narrow_batch(B), y.narrow_batch(B), tol::linear);
    if (buffer_batch > B) expect_untouched(op, "y beyond the batch", gy, B * O);

    const Tensor dy = host_normal({buffer_batch, O});
    const Tensor gdy = to_gpu(dy), gy_cpu = to_gpu(y);
    const Tensor y_in = s.relu ? y.narrow_batch(B) : none;  // read only with a fused ReLU
    const Tensor gy_in = s.relu ? gy_cpu.narrow_batch(B) : none;
    Tensor dx = Tensor::zeros({buffer_batch, I}), gdx = gpu_nans({buffer_batch, I});
    cop->backward_data(y_in, dy.narrow_batch(B), w, dx.narrow_batch(B));
    gop->backward_data(gy_in, gdy.narrow_batch(B), gw, gdx.narrow_batch(B));
    expect_close(op, "dx", gdx.narrow_batch(B), dx.narrow_batch(B), tol::linear);
    if (buffer_batch > B) expect_untouched(op, "dx beyond the batch", gdx, B * I);

    Tensor dw = Tensor::zeros({O, I}), gdw = gpu_nans({O, I});
    Tensor db = Tensor::zeros({O}), gdb = gpu_nans({O});
    cop->backward_weights(x.narrow_batch(B), y_in, dy.narrow_batch(B), dw, s.bias ? db : none);
    gop->backward_weights(gx.narrow_batch(B), gy_in, gdy.narrow_batch(B), gdw, s.bias ? gdb : none);
    expect_close(op, "dw", gdw, dw, tol::linear);
    if (s.bias) expect_close(op, "db", gdb, db, tol::linear);
  });
}

TEST_CASE("cuda linear: forward, backward_data, backward_weights; bias, fused ReLU") {
  std::cout << "[linear] cuBLAS vs oneDNN, tolerance " << num(tol::linear) << "\n";
  const LinearSpec shapes[] = {
      {100, 784, 500}, {100, 500, 10},  // MNIST-MLP
      {32, 2304, 512}, {33, 129, 65},  {7, 13, 5}, {1, 17, 3},
  };
  for (LinearSpec s : shapes)
    for (bool bias : {true, false})
      for (bool relu : {false, true}) {
        s.bias = bias, s.relu = relu;
        check_linear(s, s.batch);
      }
  check_linear({3, 784, 500, true, true}, 8);
  check_linear({5, 33, 7, false, false}, 100);
}

// ---- Conv2d --------------------------------------------------------------------------------

// Sets DTRAIN_CONV_ALGO for the ops built in its scope (the CUDA conv reads it when built).
class ConvAlgoScope {
 public:
  explicit ConvAlgoScope(const char* value) {
    if (const char* old = std::getenv("DTRAIN_CONV_ALGO")) old_ = old;
    if (value != nullptr)
      ::setenv("DTRAIN_CONV_ALGO", value, 1);
    else
      ::unsetenv("DTRAIN_CONV_ALGO");
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

void check_conv(const ConvSpec& s, int64_t buffer_batch, double tolerance = tol::conv,
                const char* mode = "direct") {
  const ConvAlgoScope algo(mode);
  const std::string op =
      name_of(s) +
      (buffer_batch > s.batch ? " (rows of a batch-" + std::to_string(buffer_batch) + " buffer)"
                              : "") +
      " [" + (mode != nullptr ? mode : "fastest") + "]";
  run_case(op, [&] {
    const int64_t B = s.batch;
    auto cop = cpu().make_conv(s);
    auto gop = gpu().make_conv(s);
    const Tensor none;
    const Shape xs = s.input_shape().with_batch(buffer_batch);
    const Shape ys = s.output_shape().with_batch(buffer_batch);
    const int64_t fan_in = s.in_channels * s.kernel_h * s.kernel_w;
    const Tensor x = host_normal(xs);
    const Tensor w = host_normal(s.weight_shape(), 1.0f / std::sqrt(static_cast<float>(fan_in)));
    const Tensor b = host_normal({s.out_channels}, 0.5f);
    const Tensor gx = to_gpu(x), gw = to_gpu(w), gb = to_gpu(b);

    Tensor y = Tensor::zeros(ys), gy = gpu_nans(ys);
    cop->forward(x.narrow_batch(B), w, s.bias ? b : none, y.narrow_batch(B));
    gop->forward(gx.narrow_batch(B), gw, s.bias ? gb : none, gy.narrow_batch(B));
    expect_close(op, "y", gy.narrow_batch(B), y.narrow_batch(B), tolerance);
    if (buffer_batch > B) expect_untouched(op, "y beyond the batch", gy, s.output_shape().numel());

    const Tensor dy = host_normal(ys);
    const Tensor gdy = to_gpu(dy), gy_cpu = to_gpu(y);
    const Tensor y_in = s.relu ? y.narrow_batch(B) : none;
    const Tensor gy_in = s.relu ? gy_cpu.narrow_batch(B) : none;
    Tensor dx = Tensor::zeros(xs), gdx = gpu_nans(xs);
    cop->backward_data(y_in, dy.narrow_batch(B), w, dx.narrow_batch(B));
    gop->backward_data(gy_in, gdy.narrow_batch(B), gw, gdx.narrow_batch(B));
    expect_close(op, "dx", gdx.narrow_batch(B), dx.narrow_batch(B), tolerance);
    if (buffer_batch > B) expect_untouched(op, "dx beyond the batch", gdx, s.input_shape().numel());

    Tensor dw = Tensor::zeros(s.weight_shape()), gdw = gpu_nans(s.weight_shape());
    Tensor db = Tensor::zeros({s.out_channels}), gdb = gpu_nans({s.out_channels});
    cop->backward_weights(x.narrow_batch(B), y_in, dy.narrow_batch(B), dw, s.bias ? db : none);
    gop->backward_weights(gx.narrow_batch(B), gy_in, gdy.narrow_batch(B), gdw, s.bias ? gdb : none);
    expect_close(op, "dw", gdw, dw, tolerance);
    if (s.bias) expect_close(op, "db", gdb, db, tolerance);
  });
}

TEST_CASE("cuda conv2d: 1x1, 3x3, strided, AlexNet and ResNet stems; bias, fused ReLU") {
  std::cout << "[conv2d] cuDNN vs oneDNN, tolerance " << num(tol::conv)
            << " with DTRAIN_CONV_ALGO=direct, " << num(tol::conv_transforms)
            << " with the fastest algorithms (FFT, non-fused Winograd)\n";
  // batch, in, H, W, out, kh, kw, sh, sw, ph, pw
  const ConvSpec shapes[] = {
      {4, 64, 14, 14, 128, 1, 1, 1, 1, 0, 0},    // 1x1
      {4, 64, 28, 28, 128, 1, 1, 2, 2, 0, 0},    // 1x1 stride 2 (ResNet downsample)
      {4, 32, 16, 16, 48, 3, 3, 1, 1, 1, 1},     // 3x3 pad 1
      {4, 64, 28, 28, 128, 3, 3, 2, 2, 1, 1},    // 3x3 stride 2 pad 1
      {2, 3, 224, 224, 64, 11, 11, 4, 4, 2, 2},  // AlexNet conv1: 11x11 stride 4
      {2, 64, 27, 27, 192, 5, 5, 1, 1, 2, 2},    // AlexNet conv2
      {2, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3},    // ResNet stem: 7x7 stride 2 pad 3
      {4, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2},       // LeNet C1
      {3, 5, 13, 17, 7, 3, 5, 2, 1, 1, 2},       // nothing square, nothing aligned
  };
  for (ConvSpec s : shapes)
    for (bool bias : {true, false})
      for (bool relu : {false, true}) {
        s.bias = bias, s.relu = relu;
        check_conv(s, s.batch);
        check_conv(s, s.batch, tol::conv_transforms, nullptr);
      }
  check_conv({1, 16, 12, 12, 24, 3, 3, 1, 1, 1, 1, true, true}, 4);
}

// ---- TF32 ----------------------------------------------------------------------------------

// With TF32 off, sums of 256 or 288 copies of a = 1 + 2⁻¹² are exact in fp32, whatever the
// order; TF32 drops the 2⁻¹² (10 mantissa bits) and is off by 2.4e-4. Forward, data and
// weight gradients of a GEMM and of convolutions each go through their own kernels.
TEST_CASE("cuda linear and conv2d run in strict fp32 when TF32 is off") {
  std::cout << "[tf32 off] sums of 1 + 2^-12, exact in fp32\n";
  const float a = 1.0f + 1.0f / 4096.0f;
  const Tensor none;
  run_case("tf32 probe: linear", [&] {
    const LinearSpec s{256, 256, 256, false, false};
    const std::string op = "tf32 probe: " + name_of(s);
    auto cop = cpu().make_linear(s);
    auto gop = gpu().make_linear(s);
    const Tensor ta = host_filled({256, 256}, a), ones = host_filled({256, 256}, 1.0f);
    const Tensor ga = to_gpu(ta), gones = to_gpu(ones);
    Tensor y = Tensor::zeros({256, 256}), gy = gpu_nans({256, 256});
    cop->forward(ta, ones, none, y);  // x = a, w = 1
    gop->forward(ga, gones, none, gy);
    expect_close(op, "y", gy, y, tol::tf32_probe);
    Tensor dx = Tensor::zeros({256, 256}), gdx = gpu_nans({256, 256});
    cop->backward_data(none, ta, ones, dx);  // dy = a, w = 1
    gop->backward_data(none, ga, gones, gdx);
    expect_close(op, "dx", gdx, dx, tol::tf32_probe);
    Tensor dw = Tensor::zeros({256, 256}), gdw = gpu_nans({256, 256});
    cop->backward_weights(ones, none, ta, dw, none);  // x = 1, dy = a
    gop->backward_weights(gones, none, ga, gdw, none);
    expect_close(op, "dw", gdw, dw, tol::tf32_probe);
  });
  for (const ConvSpec& s : {ConvSpec{1, 256, 16, 16, 256, 1, 1, 1, 1, 0, 0, false},
                            ConvSpec{2, 32, 12, 12, 32, 3, 3, 1, 1, 1, 1, false}}) {
    const std::string op = "tf32 probe: " + name_of(s);
    run_case(op, [&] {
      const ConvAlgoScope algo("direct");  // exact sums: no FFT or Winograd rounding
      auto cop = cpu().make_conv(s);
      auto gop = gpu().make_conv(s);
      const Tensor xa = host_filled(s.input_shape(), a), x1 = host_filled(s.input_shape(), 1.0f);
      const Tensor w1 = host_filled(s.weight_shape(), 1.0f);
      const Tensor ya = host_filled(s.output_shape(), a);
      const Tensor gxa = to_gpu(xa), gx1 = to_gpu(x1), gw1 = to_gpu(w1), gya = to_gpu(ya);
      Tensor y = Tensor::zeros(s.output_shape()), gy = gpu_nans(s.output_shape());
      cop->forward(xa, w1, none, y);
      gop->forward(gxa, gw1, none, gy);
      expect_close(op, "y", gy, y, tol::tf32_probe);
      Tensor dx = Tensor::zeros(s.input_shape()), gdx = gpu_nans(s.input_shape());
      cop->backward_data(none, ya, w1, dx);
      gop->backward_data(none, gya, gw1, gdx);
      expect_close(op, "dx", gdx, dx, tol::tf32_probe);
      Tensor dw = Tensor::zeros(s.weight_shape()), gdw = gpu_nans(s.weight_shape());
      cop->backward_weights(x1, none, ya, dw, none);
      gop->backward_weights(gx1, none, gya, gdw, none);
      expect_close(op, "dw", gdw, dw, tol::tf32_probe);
    });
  }
}

// ---- Pooling -------------------------------------------------------------------------------

// Each backend's backward gets its own forward's output and workspace (max indices).
// Normal random inputs have no ties, so both pick the same maxima.
void check_pool(const PoolSpec& s) {
  const std::string op = name_of(s);
  run_case(op, [&] {
    const bool max = s.kind == PoolKind::max;
    auto cop = cpu().make_pool(s);
    auto gop = gpu().make_pool(s);
    const Tensor x = host_normal(s.input_shape()), gx = to_gpu(x);
    const Tensor cws = workspace(cpu(), cop->workspace_bytes());
    const Tensor gws = workspace(gpu(), gop->workspace_bytes());
    Tensor y = Tensor::zeros(s.output_shape()), gy = gpu_nans(s.output_shape());
    cop->forward(x, y, cws, true);
    gop->forward(gx, gy, gws, true);
    if (max) {
      expect_equal(op, "y", gy, y);
    } else {
      expect_close(op, "y", gy, y, tol::pool_avg);
    }
    const Tensor dy = host_normal(s.output_shape()), gdy = to_gpu(dy);
    Tensor dx = Tensor::zeros(s.input_shape()), gdx = gpu_nans(s.input_shape());
    cop->backward(x, y, dy, cws, dx);
    gop->backward(gx, gy, gdy, gws, gdx);
    expect_close(op, "dx", gdx, dx, max ? tol::pool_max_grad : tol::pool_avg);
    Tensor gy_eval = gpu_nans(s.output_shape());
    gop->forward(gx, gy_eval, gws, false);
    if (max) {
      expect_equal(op, "y (inference)", gy_eval, y);
    } else {
      expect_close(op, "y (inference)", gy_eval, y, tol::pool_avg);
    }
  });
}

TEST_CASE("cuda pooling: max and average, ceil mode, padding, count_include_pad") {
  std::cout << "[pool] max: y identical, dx " << num(tol::pool_max_grad) << "; avg "
            << num(tol::pool_avg) << "\n";
  using K = PoolKind;
  // kind, batch, channels, H, W, kh, kw, sh, sw, ph, pw, ceil_mode, avg_include_padding
  const PoolSpec specs[] = {
      {K::max, 4, 8, 28, 28, 2, 2, 2, 2, 0, 0},                // LeNet
      {K::max, 2, 64, 55, 55, 3, 3, 2, 2, 0, 0},               // AlexNet pool1 (overlapping)
      {K::max, 2, 64, 112, 112, 3, 3, 2, 2, 1, 1},             // ResNet stem
      {K::max, 4, 32, 32, 32, 3, 3, 2, 2, 0, 0, true},         // cifar_cnn pool1 (ceil)
      {K::max, 2, 3, 10, 7, 3, 3, 2, 2, 1, 1, true},           // ceil and padding
      {K::max, 2, 3, 9, 9, 2, 2, 2, 2, 0, 0, true},            // ceil: last window overhangs
      {K::avg, 4, 32, 16, 16, 3, 3, 2, 2, 0, 0, true, false},  // cifar_cnn pool2
      {K::avg, 4, 32, 16, 16, 3, 3, 2, 2, 0, 0, true, true},
      {K::avg, 2, 5, 9, 9, 3, 3, 1, 1, 1, 1, false, true},
      {K::avg, 2, 5, 9, 9, 3, 3, 1, 1, 1, 1, false, false},
      {K::avg, 2, 3, 10, 7, 3, 2, 2, 2, 1, 1, true, true},  // ceil, padding, not square
      {K::avg, 2, 3, 10, 7, 3, 2, 2, 2, 1, 1, true, false},
      {K::avg, 2, 512, 7, 7, 7, 7, 1, 1, 0, 0},  // ResNet's global average pool
  };
  for (const PoolSpec& s : specs) check_pool(s);
}

// ---- ReLU ----------------------------------------------------------------------------------

TEST_CASE("cuda relu: forward and backward identical to the CPU") {
  std::cout << "[relu] identical\n";
  for (const Shape& shape : {Shape{8, 3, 17, 19}, Shape{1, 1000003}}) {
    const std::string op = "relu " + shape.str();
    run_case(op, [&] {
      auto cop = cpu().make_relu(shape);
      auto gop = gpu().make_relu(shape);
      Tensor x = host_normal(shape);
      for (int64_t i = 0; i < x.numel(); i += 97) x.data<float>()[i] = (i / 97) % 2 ? 0.0f : -0.0f;
      const Tensor gx = to_gpu(x);
      Tensor y = Tensor::zeros(shape), gy = gpu_nans(shape);
      cop->forward(x, y);
      gop->forward(gx, gy);
      expect_equal(op, "y", gy, y);
      const Tensor dy = host_normal(shape), gdy = to_gpu(dy), gy_cpu = to_gpu(y);
      Tensor dx = Tensor::zeros(shape), gdx = gpu_nans(shape);
      cop->backward(x, y, dy, dx);
      gop->backward(gx, gy_cpu, gdy, gdx);
      expect_equal(op, "dx", gdx, dx);
    });
  }
}

// ---- GELU ----------------------------------------------------------------------------------

// |gpu − ref| ≤ tolerance · (1 + |ref|) for every element, ref in double.
void expect_near_reference(const std::string& op, const std::string& output, const Tensor& gpu_out,
                           const std::vector<double>& ref, double tolerance) {
  const Tensor got = to_host(gpu_out);
  REQUIRE(static_cast<size_t>(got.numel()) == ref.size());
  const float* g = got.data<float>();
  double worst = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double e = std::fabs(g[i] - ref[i]) / (1 + std::fabs(ref[i]));
    if (!(e <= worst)) worst = e, at = i;  // a NaN is the worst
  }
  const bool ok = worst <= tolerance;
  std::string line = op + "  " + output + " vs double: max error " + num(worst) + " (tolerance " +
                     num(tolerance) + " · (1 + |ref|))";
  if (!ok)
    line += "; worst [" + std::to_string(at) + "]: gpu " + fnum(g[at]) + ", ref " + num(ref[at]);
  report(ok, line);
}

TEST_CASE("cuda gelu: exact and tanh forms against the CPU and a double reference") {
  std::cout << "[gelu] forward " << num(tol::gelu) << ", backward " << num(tol::gelu_grad)
            << ", vs double " << num(tol::gelu_ref) << "\n";
  for (const GeluApproximation form : {GeluApproximation::none, GeluApproximation::tanh})
    for (const Shape& shape : {Shape{8, 3, 17, 19}, Shape{1, 1000003}}) {
      const std::string op =
          std::string(form == GeluApproximation::tanh ? "gelu tanh " : "gelu ") + shape.str();
      run_case(op, [&] {
        const GeluSpec spec{shape, form};
        auto cop = cpu().make_gelu(spec);
        auto gop = gpu().make_gelu(spec);
        Tensor x = host_normal(shape, 3.0f);  // the saturated tails as well
        x.data<float>()[0] = 0.0f;
        x.data<float>()[1] = -0.0f;
        x.data<float>()[2] = 40.0f;
        x.data<float>()[3] = -40.0f;
        const Tensor gx = to_gpu(x);
        Tensor y = Tensor::zeros(shape), gy = gpu_nans(shape);
        cop->forward(x, y);
        gop->forward(gx, gy);
        expect_close(op, "y", gy, y, tol::gelu);
        const Tensor dy = host_normal(shape), gdy = to_gpu(dy);
        Tensor dx = Tensor::zeros(shape), gdx = gpu_nans(shape);
        cop->backward(x, dy, dx);
        gop->backward(gx, gdy, gdx);
        expect_close(op, "dx", gdx, dx, tol::gelu_grad);
        std::vector<double> ry(x.numel()), rdx(x.numel());
        for (int64_t i = 0; i < x.numel(); ++i) {
          const test::GeluRef r = test::ref_gelu(x.data<float>()[i], form);
          ry[i] = r.y;
          rdx[i] = dy.data<float>()[i] * r.dydx;
        }
        expect_near_reference(op, "y", gy, ry, tol::gelu_ref);
        expect_near_reference(op, "dx", gdx, rdx, tol::gelu_ref);
      });
    }
}

// ---- LRN -----------------------------------------------------------------------------------

TEST_CASE("cuda lrn: AlexNet's and cifar10_full's parameters, and a strong normaliser") {
  std::cout << "[lrn] forward " << num(tol::lrn) << ", backward " << num(tol::lrn_grad) << "\n";
  // batch, channels, H, W, size, alpha, beta, k (PyTorch LocalResponseNorm semantics)
  const LrnSpec specs[] = {
      {2, 64, 55, 55, 5, 1e-4f, 0.75f, 2.0f},   // AlexNet lrn1
      {2, 192, 27, 27, 5, 1e-4f, 0.75f, 2.0f},  // AlexNet lrn2
      {4, 32, 16, 16, 3, 5e-5f, 0.75f, 1.0f},   // cifar10_full norm1
      {2, 7, 9, 11, 5, 1.0f, 0.75f, 1.0f},      // α/n·Σx² ≫ k: the formula shows
      {2, 3, 5, 5, 5, 0.5f, 0.6f, 1.5f},        // fewer channels than the window
  };
  for (const LrnSpec& s : specs) {
    const std::string op = name_of(s);
    run_case(op, [&] {
      auto cop = cpu().make_lrn(s);
      auto gop = gpu().make_lrn(s);
      const Tensor x = host_normal(s.shape(), 2.0f), gx = to_gpu(x);
      const Tensor cws = workspace(cpu(), cop->workspace_bytes());
      const Tensor gws = workspace(gpu(), gop->workspace_bytes());
      Tensor y = Tensor::zeros(s.shape()), gy = gpu_nans(s.shape());
      cop->forward(x, y, cws, true);
      gop->forward(gx, gy, gws, true);
      expect_close(op, "y", gy, y, tol::lrn);
      const Tensor dy = host_normal(s.shape()), gdy = to_gpu(dy);
      Tensor dx = Tensor::zeros(s.shape()), gdx = gpu_nans(s.shape());
      cop->backward(x, y, dy, cws, dx);
      gop->backward(gx, gy, gdy, gws, gdx);
      expect_close(op, "dx", gdx, dx, tol::lrn_grad);
      Tensor gy_eval = gpu_nans(s.shape());
      gop->forward(gx, gy_eval, gws, false);
      expect_close(op, "y (inference)", gy_eval, y, tol::lrn);
    });
  }
}

// ---- Batch normalisation -------------------------------------------------------------------

TEST_CASE("cuda batchnorm: training forward with batch statistics, inference, backward") {
  std::cout << "[batchnorm] forward " << num(tol::bn) << ", backward " << num(tol::bn_grad) << "\n";
  // batch, channels, H, W, epsilon; H = W = 1 is a [N, C] input
  const BatchNormSpec specs[] = {
      {8, 16, 14, 14, 1e-5f}, {2, 64, 56, 56, 1e-5f},  // NCHW (ResNet-like)
      {3, 4, 5, 7, 1e-5f},                             // nothing aligned
      {64, 100, 1, 1, 1e-5f},                          // [N, C]
      {3, 5, 1, 1, 1e-3f},  // three samples: the biased variance is 2/3 of the unbiased one
  };
  for (BatchNormSpec s : specs)
    for (const bool relu : {false, true}) {
      s.relu = relu;  // fused: y = max(bn(x), 0), dy masked by it
      const std::string op = name_of(s);
      run_case(op, [&] {
        const int64_t C = s.channels, plane = s.height * s.width;
        const Shape shape = plane == 1 ? Shape{s.batch, C} : s.shape();
        auto cop = cpu().make_batchnorm(s);
        auto gop = gpu().make_batchnorm(s);
        // Per-channel means away from 0 (the variance must not come from E[x²] − mean² badly).
        Tensor x = host_normal(shape, 2.0f);
        for (int64_t i = 0; i < x.numel(); ++i)
          x.data<float>()[i] += 0.37f * static_cast<float>(i / plane % C) - 1.0f;
        const Tensor scale = host_normal({C}, 0.5f, 1.0f), shift = host_normal({C}, 0.5f);
        const Tensor gx = to_gpu(x), gscale = to_gpu(scale), gshift = to_gpu(shift);

        // Each backend's own per-forward state (a fused ReLU's mask, where it keeps one).
        const auto workspace = [](BatchNormOp& o, Backend& b) {
          const auto bytes = static_cast<int64_t>(o.workspace_bytes());
          return bytes > 0 ? b.empty({bytes}, DType::u8) : Tensor();
        };
        const Tensor cws = workspace(*cop, cpu()), gws = workspace(*gop, gpu());
        Tensor y = Tensor::zeros(shape), mean = Tensor::zeros({C}), var = Tensor::zeros({C});
        Tensor gy = gpu_nans(shape), gmean = gpu_nans({C}), gvar = gpu_nans({C});
        cop->forward_training(x, scale, shift, y, mean, var, cws);
        gop->forward_training(gx, gscale, gshift, gy, gmean, gvar, gws);
        expect_close(op, "y", gy, y, tol::bn);
        expect_close(op, "batch mean", gmean, mean, tol::bn);
        expect_close(op, "batch variance (biased)", gvar, var, tol::bn);

        // Each backend from its own batch statistics, as in training.
        const Tensor dy = host_normal(shape), gdy = to_gpu(dy);
        Tensor dx = Tensor::zeros(shape), dscale = Tensor::zeros({C}), dshift = Tensor::zeros({C});
        Tensor gdx = gpu_nans(shape), gdscale = gpu_nans({C}), gdshift = gpu_nans({C});
        cop->backward(x, y, dy, scale, mean, var, cws, dx, dscale, dshift);
        gop->backward(gx, gy, gdy, gscale, gmean, gvar, gws, gdx, gdscale, gdshift);
        expect_close(op, "dx", gdx, dx, tol::bn_grad);
        expect_close(op, "dscale", gdscale, dscale, tol::bn_grad);
        expect_close(op, "dshift", gdshift, dshift, tol::bn_grad);

        Tensor running_mean = host_normal({C}, 0.5f), running_var = host_normal({C}, 1.0f);
        for (int64_t c = 0; c < C; ++c)
          running_var.data<float>()[c] = 0.25f + std::fabs(running_var.data<float>()[c]);
        const Tensor grm = to_gpu(running_mean), grv = to_gpu(running_var);
        Tensor yi = Tensor::zeros(shape), gyi = gpu_nans(shape);
        cop->forward_inference(x, scale, shift, running_mean, running_var, yi);
        gop->forward_inference(gx, gscale, gshift, grm, grv, gyi);
        expect_close(op, "y (inference)", gyi, yi, tol::bn);
      });
    }
}

// ---- Softmax + cross-entropy ---------------------------------------------------------------

// Labels: every third row its argmax (first maximum, as the CPU and PyTorch count), the others
// random. With `special`, row 0 has logits ±100 (stability) and row 1 ties at 0 with label 1
// (the first maximum, index 0, is the prediction: not correct).
void check_softmax(int64_t B, int64_t K, bool special) {
  const std::string op = "softmax_xent " + dims({B, K});
  run_case(op, [&] {
    const SoftmaxXentSpec s{B, K};
    auto cop = cpu().make_softmax_xent(s);
    auto gop = gpu().make_softmax_xent(s);
    Tensor z = host_normal({B, K}, 3.0f);
    float* zp = z.data<float>();
    if (special) {
      for (int64_t j = 0; j < K; ++j) zp[j] = j == 0 ? 100.0f : (j == 1 ? -100.0f : 0.0f);
      for (int64_t j = 0; j < K; ++j) zp[K + j] = 0.0f;
    }
    Tensor labels = Tensor::empty({B}, DType::i32);
    const uint64_t stream = fresh_stream();
    for (int64_t r = 0; r < B; ++r) {
      int64_t argmax = 0;
      for (int64_t j = 1; j < K; ++j)
        if (zp[r * K + j] > zp[r * K + argmax]) argmax = j;
      labels.data<int32_t>()[r] = static_cast<int32_t>(
          r % 3 == 0 ? argmax : static_cast<int64_t>(random_bits(kSeed, stream, r) % K));
    }
    if (special) labels.data<int32_t>()[1] = 1 % static_cast<int32_t>(K);
    const Tensor gz = to_gpu(z), glabels = to_gpu(labels);

    Tensor p = Tensor::zeros({B, K}), stats = Tensor::zeros({2});
    Tensor gp = gpu_nans({B, K}), gstats = gpu_nans({2});
    cop->forward(z, labels, p, stats);
    gop->forward(gz, glabels, gp, gstats);
    expect_close(op, "probs", gp, p, tol::softmax);
    const Tensor hs = to_host(gstats);
    const float loss = stats.data<float>()[0], gloss = hs.data<float>()[0];
    const double loss_err = std::fabs(static_cast<double>(gloss) - loss) / std::fabs(loss);
    report(loss_err <= tol::softmax_loss, op + "  loss sum: gpu " + fnum(gloss) + ", cpu " +
                                              fnum(loss) + ", rel error " + num(loss_err) +
                                              " (tolerance " + num(tol::softmax_loss) + ")");
    report(hs.data<float>()[1] == stats.data<float>()[1], op + "  correct count: gpu " +
                                                              fnum(hs.data<float>()[1]) + ", cpu " +
                                                              fnum(stats.data<float>()[1]));

    // Both from the CPU's probabilities.
    const Tensor gp_cpu = to_gpu(p);
    Tensor dz = Tensor::zeros({B, K}), gdz = gpu_nans({B, K});
    const float grad_scale = 1.0f / static_cast<float>(B);
    cop->backward(p, labels, dz, grad_scale);
    gop->backward(gp_cpu, glabels, gdz, grad_scale);
    expect_close(op, "dlogits", gdz, dz, tol::softmax_grad);
  });
}

TEST_CASE("cuda softmax cross-entropy: probabilities, loss sum, correct count, gradient") {
  std::cout << "[softmax_xent] probs " << num(tol::softmax) << ", loss " << num(tol::softmax_loss)
            << ", correct identical, "
            << "dlogits " << num(tol::softmax_grad) << "\n";
  check_softmax(3, 4, true);
  check_softmax(100, 10, true);
  check_softmax(128, 1000, false);
  check_softmax(7, 1001, true);
}

// ---- Dropout -------------------------------------------------------------------------------

std::vector<double> magnitudes(const Tensor& t) {
  std::vector<double> m(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) m[i] = std::fabs(static_cast<double>(t.data<float>()[i]));
  return m;
}

// The mask comes from the counter RNG of core/rng.h on both devices: it must be the CPU's,
// byte for byte; kept values are x / (1 − p) (x · (1/(1 − p)) on the CPU: 2 ulps allowed).
void check_dropout(const Shape& shape, int64_t buffer_batch, float p, uint64_t seed,
                   uint64_t stream) {
  std::ostringstream name;
  name << "dropout " << shape.str() << " p " << p << " seed " << seed << " stream 0x" << std::hex
       << stream;
  if (buffer_batch > shape[0]) name << std::dec << " (rows of a batch-" << buffer_batch << " mask)";
  const std::string op = name.str();
  run_case(op, [&] {
    const int64_t B = shape[0];
    const Shape full = shape.with_batch(buffer_batch);
    auto cop = cpu().make_dropout({shape});
    auto gop = gpu().make_dropout({shape});
    const Tensor x = host_normal(shape), gx = to_gpu(x);
    Tensor mask = Tensor::empty(full, DType::u8);
    std::memset(mask.raw(), 0xCD, mask.bytes());
    const Tensor gmask = to_gpu(mask);
    Tensor y = Tensor::zeros(shape), gy = gpu_nans(shape);
    cop->forward(x, y, mask.narrow_batch(B), p, seed, stream);
    gop->forward(gx, gy, gmask.narrow_batch(B), p, seed, stream);
    expect_equal(op, "mask", gmask, mask);  // the rows beyond the batch stay 0xCD on both
    int64_t kept = 0;
    for (int64_t i = 0; i < x.numel(); ++i) kept += mask.data<uint8_t>()[i] != 0;
    std::cout << "        kept " << kept << " of " << x.numel() << "\n";
    expect_within_ulps(op, "y", gy, y, magnitudes(y), 2);
    const Tensor dy = host_normal(shape), gdy = to_gpu(dy), gmask_cpu = to_gpu(mask);
    Tensor dx = Tensor::zeros(shape), gdx = gpu_nans(shape);
    cop->backward(dy, mask.narrow_batch(B), p, dx);
    gop->backward(gdy, gmask_cpu.narrow_batch(B), p, gdx);
    expect_within_ulps(op, "dx", gdx, dx, magnitudes(dx), 2);
  });
}

TEST_CASE("cuda dropout: the CPU's mask exactly, forward and backward") {
  std::cout << "[dropout] mask identical, values within 2 ulps\n";
  const uint64_t layer_stream = stream_id(RngStream::dropout, (uint64_t{5} << 32) + 12345);
  check_dropout({64, 4096}, 64, 0.5f, 1, layer_stream);  // AlexNet fc6
  check_dropout({1000003}, 1000003, 0.25f, 7, stream_id(RngStream::dropout, 3));
  check_dropout({7, 3, 5}, 7, 0.1f, 0xdeadbeefcafeULL, ~uint64_t{0});
  check_dropout({10, 4096}, 64, 0.5f, 1, layer_stream + 1);  // a smaller last batch
  check_dropout({100, 500}, 100, 0.0f, 2, 3);                // keeps everything
  check_dropout({100, 500}, 100, 0.9f, 2, 4);
}

// ---- sequence models -----------------------------------------------------------------------
// The CUDA ops against plain references written here: in float, in the kernels' order of
// additions, where the op promises that order (rows, embedding: identical bits), and in double
// otherwise (layer norm, attention: max |gpu − ref| / max |ref|). Every op is also run twice on
// the same inputs and must give the same bits (no atomics anywhere).

// max |gpu − ref| ≤ tolerance · max |ref|; a NaN fails.
void expect_close_to(const std::string& op, const std::string& output, const Tensor& gpu_out,
                     const std::vector<double>& ref, double tolerance) {
  const Tensor got = to_host(gpu_out);
  REQUIRE(static_cast<size_t>(got.numel()) == ref.size());
  const float* g = got.data<float>();
  double max_abs = 0, max_ref = 0;
  int64_t worst = 0, nans = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    max_ref = std::max(max_ref, std::fabs(ref[i]));
    if (std::isnan(g[i])) {
      if (nans++ == 0) worst = i;
      continue;
    }
    const double d = std::fabs(g[i] - ref[i]);
    if (d > max_abs && nans == 0) worst = i;
    max_abs = std::max(max_abs, d);
  }
  const double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
  const bool ok = nans == 0 && rel <= tolerance;
  std::string line = op + "  " + output + " vs double: max rel error " + num(rel) + " (tolerance " +
                     num(tolerance) + ", max |ref| " + num(max_ref) + ")";
  if (nans > 0) line += "; " + std::to_string(nans) + " NaN";
  if (!ok)
    line += "; worst [" + std::to_string(worst) + "]: gpu " + fnum(g[worst]) + ", ref " +
            num(ref[worst]);
  report(ok, line);
}

// A host f32 tensor holding the values of `values`.
Tensor host_values(const Shape& shape, const std::vector<float>& values) {
  Tensor t = Tensor::empty(shape);
  REQUIRE(static_cast<size_t>(t.numel()) == values.size());
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

TEST_CASE("cuda add_to_rows and sum_rows: the float loops' bits, twice the same") {
  std::cout << "[rows] identical to a float loop adding the rows in order\n";
  for (const Shape& shape : {Shape{1, 7}, Shape{4, 3, 5}, Shape{16, 1024, 96}}) {
    const std::string op = "rows " + shape.str();
    run_case(op, [&] {
      const int64_t rows = shape[0], len = shape.numel() / rows;
      const Tensor x = host_normal(shape), row = host_normal({len});
      Tensor want = copy_of(x);
      for (int64_t i = 0; i < x.numel(); ++i) want.data<float>()[i] += row.data<float>()[i % len];
      const Tensor gy = to_gpu(x), grow = to_gpu(row);
      gpu().add_to_rows(gy, grow);
      expect_equal(op, "add_to_rows", gy, want);

      Tensor sum = Tensor::zeros({len});
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < len; ++i) sum.data<float>()[i] += x.data<float>()[r * len + i];
      const Tensor gx = to_gpu(x);
      Tensor gsum = gpu_nans({len});
      gpu().sum_rows(gx, gsum);
      expect_equal(op, "sum_rows", gsum, sum);
      const Tensor first = to_host(gsum);
      gpu().sum_rows(gx, gsum);
      expect_equal(op, "sum_rows again", gsum, first);
    });
  }
}

// Ids drawn from a few hot values and the whole vocabulary, so that runs of equal ids are
// long and some table rows are named by no id.
std::vector<float> draw_ids(int64_t rows, int64_t vocab, uint64_t stream) {
  std::vector<float> ids(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t bits = random_bits(kSeed, stream, static_cast<uint64_t>(r));
    const int64_t id = bits % 3 == 0 ? static_cast<int64_t>(bits >> 8) % std::min<int64_t>(vocab, 4)
                                     : static_cast<int64_t>(bits >> 8) % vocab;
    ids[r] = static_cast<float>(id);
  }
  return ids;
}

// Spec rows `spec_rows`, called with the first `rows` ids.
void check_embedding(int64_t spec_rows, int64_t rows, int64_t vocab, int64_t dim, bool accumulate) {
  const std::string op = "embedding " + dims({rows, vocab, dim}) +
                         (rows < spec_rows ? " (of " + std::to_string(spec_rows) + ")" : "") +
                         (accumulate ? " accumulate" : "");
  run_case(op, [&] {
    auto gop = gpu().make_embedding({spec_rows, vocab, dim});
    const std::vector<float> id_values = draw_ids(rows, vocab, fresh_stream());
    const Tensor ids = host_values({rows}, id_values), gids = to_gpu(ids);
    const Tensor table = host_normal({vocab, dim}), gtable = to_gpu(table);
    Tensor gy = gpu_nans({rows, dim});
    gop->forward(gids, gtable, gy);
    Tensor want_y = Tensor::empty({rows, dim});
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(want_y.data<float>() + r * dim,
                  table.data<float>() + static_cast<int64_t>(id_values[r]) * dim,
                  dim * sizeof(float));
    expect_equal(op, "y", gy, want_y);

    // dtable[v] (+)= the rows of dy with id v, added in increasing row order, in float.
    const Tensor dy = host_normal({rows, dim}), gdy = to_gpu(dy);
    const Tensor before = accumulate ? host_normal({vocab, dim}) : host_filled({vocab, dim}, kNaN);
    Tensor want = Tensor::zeros({vocab, dim});
    std::vector<bool> named(vocab, false);
    for (int64_t r = 0; r < rows; ++r) named[static_cast<int64_t>(id_values[r])] = true;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t v = static_cast<int64_t>(id_values[r]);
      for (int64_t c = 0; c < dim; ++c)
        want.data<float>()[v * dim + c] += dy.data<float>()[r * dim + c];
    }
    if (accumulate)
      for (int64_t v = 0; v < vocab; ++v)
        for (int64_t c = 0; c < dim; ++c) {
          const int64_t i = v * dim + c;
          want.data<float>()[i] =
              named[v] ? before.data<float>()[i] + want.data<float>()[i] : before.data<float>()[i];
        }
    Tensor gdtable = to_gpu(before);
    gop->backward(gids, gdy, gdtable, accumulate);
    expect_equal(op, "dtable", gdtable, want);
    gpu().copy(gdtable, before);
    gop->backward(gids, gdy, gdtable, accumulate);
    expect_equal(op, "dtable again", gdtable, want);
  });
}

TEST_CASE("cuda embedding: gather, and a scatter-add with the bits of an in-order float sum") {
  std::cout << "[embedding] y copies table rows; dtable identical to a float loop over the rows "
               "in order\n";
  for (const bool accumulate : {false, true}) {
    check_embedding(1, 1, 5, 3, accumulate);
    check_embedding(40, 37, 11, 70, accumulate);         // a smaller last batch
    check_embedding(2048, 2048, 50257, 64, accumulate);  // GPT-2's vocabulary
    check_embedding(4096, 4096, 65, 130, accumulate);    // a character vocabulary: long runs
  }
}

// Layer norm in double: y, mean, rstd, dx, dgamma, dbeta.
struct LayerNormRef {
  std::vector<double> y, mean, rstd, dx, dgamma, dbeta;
};
LayerNormRef ref_layer_norm(int64_t rows, int64_t features, float epsilon, const float* x,
                            const float* gamma, const float* beta, const float* dy) {
  LayerNormRef r{std::vector<double>(rows * features),
                 std::vector<double>(rows),
                 std::vector<double>(rows),
                 std::vector<double>(rows * features),
                 std::vector<double>(features),
                 std::vector<double>(features)};
  const double f = static_cast<double>(features);
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * features;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < features; ++c) mean += xr[c];
    mean /= f;
    for (int64_t c = 0; c < features; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= f;
    const double rstd = 1 / std::sqrt(var + epsilon);
    r.mean[i] = mean;
    r.rstd[i] = rstd;
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < features; ++c) {
      const double xhat = (xr[c] - mean) * rstd, d = dy[i * features + c];
      r.y[i * features + c] = xhat * gamma[c] + (beta ? beta[c] : 0.0);
      sum_g += d * gamma[c];
      sum_gx += d * gamma[c] * xhat;
      r.dgamma[c] += d * xhat;
      r.dbeta[c] += d;
    }
    for (int64_t c = 0; c < features; ++c) {
      const double xhat = (xr[c] - mean) * rstd;
      r.dx[i * features + c] =
          rstd * (dy[i * features + c] * gamma[c] - sum_g / f - xhat * sum_gx / f);
    }
  }
  return r;
}

void check_layer_norm(int64_t spec_rows, int64_t rows, int64_t features, bool bias) {
  const std::string op = "layer_norm " + dims({rows, features}) + (bias ? "" : " nobias") +
                         (rows < spec_rows ? " (of " + std::to_string(spec_rows) + ")" : "");
  run_case(op, [&] {
    const float eps = 1e-5f;
    auto gop = gpu().make_layer_norm({spec_rows, features, eps, bias});
    const Tensor x = host_normal({rows, features}, 3.0f, 2.0f);  // a mean far from 0
    const Tensor gamma = host_normal({features}, 0.3f, 1.0f), beta = host_normal({features});
    const Tensor dy = host_normal({rows, features});
    const Tensor gx = to_gpu(x), ggamma = to_gpu(gamma), gbeta = to_gpu(beta), gdy = to_gpu(dy);
    const Tensor none;
    Tensor gy = gpu_nans({rows, features}), gmean = gpu_nans({rows}), grstd = gpu_nans({rows});
    gop->forward(gx, ggamma, bias ? gbeta : none, gy, gmean, grstd);
    const LayerNormRef r = ref_layer_norm(rows, features, eps, x.data<float>(), gamma.data<float>(),
                                          bias ? beta.data<float>() : nullptr, dy.data<float>());
    expect_close_to(op, "y", gy, r.y, tol::layer_norm);
    expect_close_to(op, "mean", gmean, r.mean, tol::layer_norm);
    expect_close_to(op, "rstd", grstd, r.rstd, tol::layer_norm);
    Tensor gdx = gpu_nans({rows, features}), gdgamma = gpu_nans({features});
    Tensor gdbeta = gpu_nans({features});
    gop->backward(gx, gdy, ggamma, gmean, grstd, gdx, gdgamma, bias ? gdbeta : none);
    expect_close_to(op, "dx", gdx, r.dx, tol::layer_norm_grad);
    expect_close_to(op, "dgamma", gdgamma, r.dgamma, tol::layer_norm_grad);
    if (bias) expect_close_to(op, "dbeta", gdbeta, r.dbeta, tol::layer_norm_grad);
    const Tensor dx1 = to_host(gdx), dgamma1 = to_host(gdgamma);
    gop->backward(gx, gdy, ggamma, gmean, grstd, gdx, gdgamma, bias ? gdbeta : none);
    expect_equal(op, "dx again", gdx, dx1);
    expect_equal(op, "dgamma again", gdgamma, dgamma1);
  });
}

TEST_CASE("cuda layer_norm: forward, mean and rstd, backward, against double") {
  std::cout << "[layer_norm] forward " << num(tol::layer_norm) << ", backward "
            << num(tol::layer_norm_grad) << " of max |ref|\n";
  check_layer_norm(1, 1, 1, true);  // one feature: y = beta, dx = 0
  check_layer_norm(7, 7, 70, true);
  check_layer_norm(10, 7, 70, false);  // a smaller last batch
  check_layer_norm(300, 300, 5, true);
  check_layer_norm(1024, 1024, 768, true);  // GPT-2's width
  check_layer_norm(1024, 1024, 768, false);
  check_layer_norm(4100, 4100, 33, true);  // more rows than chunks of the column sums
}

// Causal attention in double: y, lse and the gradient of qkv for an output gradient dy, with
// ops.h's dropout draw (dropout 0: none).
struct AttentionRef {
  std::vector<double> y, lse, dqkv;
};
AttentionRef ref_attention(const AttentionSpec& s, const float* qkv, const float* dy, float dropout,
                           uint64_t seed, uint64_t stream) {
  const int64_t N = s.batch, T = s.seq, H = s.heads, D = s.head_dim, C = H * D, W = 3 * C;
  const double scale = 1 / std::sqrt(static_cast<double>(D));
  const double keep_scale = dropout > 0 ? 1 / (1 - static_cast<double>(dropout)) : 1.0;
  AttentionRef r{std::vector<double>(N * T * C), std::vector<double>(N * H * T),
                 std::vector<double>(N * T * W)};
  std::vector<double> p(T), z(T), dp(T);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const float* q = qkv + (n * T + t) * W + h * D;
        double m = -1e300;
        for (int64_t u = 0; u <= t; ++u) {
          const float* k = qkv + (n * T + u) * W + C + h * D;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * k[d];
          p[u] = dot * scale;
          m = std::max(m, p[u]);
        }
        double l = 0;
        for (int64_t u = 0; u <= t; ++u) l += std::exp(p[u] - m);
        const double lse = m + std::log(l);
        r.lse[(n * H + h) * T + t] = lse;
        for (int64_t u = 0; u <= t; ++u) {
          p[u] = std::exp(p[u] - lse);
          const uint64_t index = static_cast<uint64_t>(((n * H + h) * T + t) * T + u);
          const bool keep = dropout == 0 || random_uniform(seed, stream, index) >= dropout;
          z[u] = keep ? p[u] * keep_scale : 0.0;
          dp[u] = keep ? keep_scale : 0.0;  // dP = dZ · this
        }
        double* yt = r.y.data() + (n * T + t) * C + h * D;
        for (int64_t u = 0; u <= t; ++u) {
          const float* v = qkv + (n * T + u) * W + 2 * C + h * D;
          for (int64_t d = 0; d < D; ++d) yt[d] += z[u] * v[d];
        }
        const float* g = dy + (n * T + t) * C + h * D;
        double rowdot = 0;
        for (int64_t u = 0; u <= t; ++u) {
          const float* v = qkv + (n * T + u) * W + 2 * C + h * D;
          double dz = 0;
          for (int64_t d = 0; d < D; ++d) dz += static_cast<double>(g[d]) * v[d];
          double* dv = r.dqkv.data() + (n * T + u) * W + 2 * C + h * D;
          for (int64_t d = 0; d < D; ++d) dv[d] += z[u] * g[d];
          dp[u] *= dz;
          rowdot += p[u] * dp[u];
        }
        double* dq = r.dqkv.data() + (n * T + t) * W + h * D;
        for (int64_t u = 0; u <= t; ++u) {
          const double ds = p[u] * (dp[u] - rowdot) * scale;
          const float* k = qkv + (n * T + u) * W + C + h * D;
          double* dk = r.dqkv.data() + (n * T + u) * W + C + h * D;
          for (int64_t d = 0; d < D; ++d) {
            dq[d] += ds * k[d];
            dk[d] += ds * q[d];
          }
        }
      }
  return r;
}

// The spec's batch is spec.batch; the op runs on the first `batch` samples.
void check_attention(const AttentionSpec& spec, int64_t batch) {
  std::ostringstream name;
  name << "attention " << dims({batch, spec.seq, spec.heads, spec.head_dim}) << " dropout "
       << spec.dropout;
  if (batch < spec.batch) name << " (of " << spec.batch << ")";
  const std::string op = name.str();
  run_case(op, [&] {
    AttentionSpec s = spec;
    s.batch = batch;
    const int64_t T = s.seq, H = s.heads, C = s.channels();
    const uint64_t seed = kSeed, stream = stream_id(RngStream::dropout, 77);
    auto gop = gpu().make_attention(spec);
    const Tensor qkv = host_normal({batch, T, 3 * C}, 1.5f), dy = host_normal({batch, T, C});
    const Tensor gqkv = to_gpu(qkv), gdy = to_gpu(dy);
    const Tensor ws = workspace(gpu(), gop->workspace_bytes());
    const AttentionRef r =
        ref_attention(s, qkv.data<float>(), dy.data<float>(), s.dropout, seed, stream);
    Tensor gy = gpu_nans({batch, T, C}), glse = gpu_nans({batch, H, T});
    gop->forward(gqkv, gy, glse, ws, /*training=*/true, seed, stream);
    expect_close_to(op, "y", gy, r.y, tol::attention);
    expect_close_to(op, "lse", glse, r.lse, tol::attention);
    Tensor gdqkv = gpu_nans({batch, T, 3 * C});
    gop->backward(gqkv, gy, gdy, glse, ws, seed, stream, gdqkv);
    expect_close_to(op, "dqkv", gdqkv, r.dqkv, tol::attention_grad);

    // The same bits again, forward and backward.
    const Tensor y1 = to_host(gy), dqkv1 = to_host(gdqkv);
    gop->forward(gqkv, gy, glse, ws, true, seed, stream);
    expect_equal(op, "y again", gy, y1);
    gop->backward(gqkv, gy, gdy, glse, ws, seed, stream, gdqkv);
    expect_equal(op, "dqkv again", gdqkv, dqkv1);

    if (s.dropout > 0) {
      // Another stream drops other weights; evaluation drops none.
      gop->forward(gqkv, gy, glse, ws, true, seed, stream + 1);
      const Tensor other = to_host(gy);
      int64_t differ = 0;
      for (int64_t i = 0; i < other.numel(); ++i)
        differ += other.data<float>()[i] != y1.data<float>()[i];
      report(differ > 0, op + "  another stream: " + std::to_string(differ) + " of " +
                             std::to_string(other.numel()) + " outputs differ");
      const AttentionRef plain = ref_attention(s, qkv.data<float>(), dy.data<float>(), 0.0f, 0, 0);
      gop->forward(gqkv, gy, glse, ws, /*training=*/false, seed, stream);
      expect_close_to(op, "y in evaluation (no dropout)", gy, plain.y, tol::attention);
      expect_close_to(op, "lse in evaluation", glse, plain.lse, tol::attention);
    }
  });
}

TEST_CASE("cuda attention: causal flash attention against double, dropout, same bits twice") {
  std::cout << "[attention] forward " << num(tol::attention) << ", backward "
            << num(tol::attention_grad) << " of max |ref|\n";
  check_attention({1, 1, 1, 64, 0.0f}, 1);     // one position
  check_attention({2, 70, 2, 8, 0.0f}, 2);     // T not a multiple of the tile
  check_attention({2, 64, 1, 64, 0.0f}, 2);    // exactly one tile, one head
  check_attention({3, 70, 2, 24, 0.0f}, 2);    // a smaller last batch
  check_attention({1, 130, 3, 40, 0.2f}, 1);   // dropout, head_dim not a power of two
  check_attention({2, 100, 2, 128, 0.1f}, 2);  // the largest head_dim
  check_attention({1, 97, 1, 96, 0.0f}, 1);
  check_attention({1, 1024, 2, 64, 0.0f}, 1);  // GPT-2's block and head_dim
  check_attention({1, 1024, 1, 64, 0.1f}, 1);
  check_attention({1, 1100, 1, 32, 0.0f}, 1);  // beyond 1024
}

// Informational, asserts nothing about time: GPT-2 124M's attention at block 1024, so that a
// GPU run's log shows the kernels' speed (the causal forward does 2·N·heads·T²·D flops).
TEST_CASE("cuda attention: GPT-2's shape, timed (informational)") {
  const AttentionSpec spec{8, 1024, 12, 64, 0.0f};
  const int64_t N = spec.batch, T = spec.seq, C = spec.channels();
  auto gop = gpu().make_attention(spec);
  const Tensor gqkv = to_gpu(host_normal({N, T, 3 * C})), gdy = to_gpu(host_normal({N, T, C}));
  Tensor gy = gpu().empty({N, T, C}), glse = gpu().empty({N, spec.heads, T});
  Tensor gdqkv = gpu().empty({N, T, 3 * C});
  const Tensor ws = workspace(gpu(), gop->workspace_bytes());
  const auto time_ms = [&](const std::function<void()>& pass) {
    pass();  // warm-up
    gpu().synchronize();
    constexpr int kRuns = 5;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRuns; ++i) pass();
    gpu().synchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count() /
           kRuns;
  };
  const double forward = time_ms([&] { gop->forward(gqkv, gy, glse, ws, true, kSeed, 1); });
  const double backward = time_ms([&] { gop->backward(gqkv, gy, gdy, glse, ws, kSeed, 1, gdqkv); });
  const double flops = 2.0 * N * spec.heads * T * T * spec.head_dim;
  std::cout << "[attention] " << dims({N, T, spec.heads, spec.head_dim}) << ": forward "
            << num(forward) << " ms (" << num(flops / forward / 1e9) << " TFLOP/s), backward "
            << num(backward) << " ms\n";
  CHECK(std::isfinite(to_host(gdqkv).data<float>()[0]));
}

// ---- flat-buffer operations ----------------------------------------------------------------

TEST_CASE("cuda fill_zero and fill: exact, and only the given elements") {
  std::cout << "[fill_zero, fill] identical, neighbours untouched\n";
  for (int64_t n : {1, 3, 1000003})
    for (int64_t off : {0, 1}) {
      const std::string at = " n " + std::to_string(n) + " at +" + std::to_string(off);
      for (DType dtype : {DType::f32, DType::i32, DType::u8}) {
        const std::string op = "fill_zero " + std::string(dtype_name(dtype)) + at;
        run_case(op, [&] {
          Tensor h = host_bits({n + off + 5}, dtype);
          const Tensor g = to_gpu(h);
          cpu().fill_zero(h.slice(off, {n}));
          gpu().fill_zero(g.slice(off, {n}));
          expect_equal(op, "buffer", g, h);
        });
      }
      for (float value : {3.25f, -1.5e-30f}) {
        const std::string op = "fill " + fnum(value) + at;
        run_case(op, [&] {
          Tensor h = host_normal({n + off + 5});
          const Tensor g = to_gpu(h);
          cpu().fill(h.slice(off, {n}), value);
          gpu().fill(g.slice(off, {n}), value);
          expect_equal(op, "buffer", g, h);
        });
      }
    }
}

TEST_CASE("cuda copy: host→device→device→host, pageable and pinned, any offset and dtype") {
  std::cout << "[copy] bit for bit, neighbours untouched\n";
  for (int64_t n : {1, 5, 4099, 1000003})
    for (int64_t off : {0, 1, 3}) {
      const std::string op = "copy f32 n " + std::to_string(n) + " at +" + std::to_string(off);
      run_case(op, [&] {
        const Tensor h = host_bits({n}, DType::f32);
        const Tensor d1 = gpu_nans({n + 8}), d2 = gpu_nans({n + 8});
        const Tensor v1 = d1.slice(off, {n}), v2 = d2.slice(3 - off + 1, {n});
        gpu().copy(v1, h);   // pageable host → device
        gpu().copy(v2, v1);  // device → device
        Tensor pinned = Tensor::empty({n}, DType::f32, gpu().host_allocator());
        Tensor pageable = Tensor::empty({n});
        gpu().copy(pinned, v2);    // device → pinned host
        gpu().copy(pageable, v1);  // device → pageable host
        gpu().synchronize();
        report(std::memcmp(pinned.raw(), h.raw(), h.bytes()) == 0,
               op + "  host → device → device → pinned host: " +
                   (std::memcmp(pinned.raw(), h.raw(), h.bytes()) == 0 ? "same bits" : "differs"));
        report(
            std::memcmp(pageable.raw(), h.raw(), h.bytes()) == 0,
            op + "  device → pageable host: " +
                (std::memcmp(pageable.raw(), h.raw(), h.bytes()) == 0 ? "same bits" : "differs"));
        const Tensor d3 = gpu().empty({n});
        gpu().copy(d3, pinned);  // pinned host → device
        expect_equal(op, "pinned host → device", d3, h);
        Tensor back = Tensor::empty({n});
        gpu().copy(back, pinned);  // host → host through the backend
        gpu().synchronize();
        report(std::memcmp(back.raw(), h.raw(), h.bytes()) == 0,
               op + "  host → host: " +
                   (std::memcmp(back.raw(), h.raw(), h.bytes()) == 0 ? "same bits" : "differs"));
        const Tensor hd1 = to_host(d1);
        int64_t written = 0;
        for (int64_t i = 0; i < n + 8; ++i)
          written += (i < off || i >= off + n) && !std::isnan(hd1.data<float>()[i]);
        report(written == 0,
               op + "  neighbours of the target: " + std::to_string(written) + " written");
      });
    }
  for (DType dtype : {DType::u8, DType::i32}) {
    const std::string op = "copy " + std::string(dtype_name(dtype)) + " n 13";
    run_case(op, [&] {
      const Tensor h = host_bits({13}, dtype);
      const Tensor d = gpu().empty({13}, dtype);
      gpu().copy(d, h);
      expect_equal(op, "host → device → host", d, h);
    });
  }
}

TEST_CASE("cuda copy_rows: strided rows like the CPU's, nothing else written") {
  std::cout << "[copy_rows] identical buffers\n";
  struct Case {
    int64_t rows, row_elems, src_stride, dst_stride, src_off, dst_off;
  };
  const Case cases[] = {
      {3, 2, 2, 4, 0, 1},                              // the CPU test's case
      {64, 196, 196 * 16, 196 * 32, 0, 196 * 8},       // channel_pad: into the middle channels
      {64, 196 * 16, 196 * 32, 196 * 16, 196 * 8, 0},  // and its backward: out of them
      {5, 7, 9, 7, 2, 0},                              // gather into packed rows
      {1, 100003, 100003, 100003, 1, 3},               // one long unaligned row
  };
  for (const Case& c : cases) {
    const std::string op =
        "copy_rows " + std::to_string(c.rows) + " rows of " + std::to_string(c.row_elems) +
        ", strides " + std::to_string(c.src_stride) + " → " + std::to_string(c.dst_stride) +
        ", offsets +" + std::to_string(c.src_off) + " → +" + std::to_string(c.dst_off);
    run_case(op, [&] {
      const int64_t src_n = c.src_off + (c.rows - 1) * c.src_stride + c.row_elems + 3;
      const int64_t dst_n = c.dst_off + (c.rows - 1) * c.dst_stride + c.row_elems + 3;
      const Tensor src = host_normal({src_n}), gsrc = to_gpu(src);
      Tensor dst = host_normal({dst_n});
      const Tensor gdst = to_gpu(dst);
      const int64_t src_span = src_n - c.src_off, dst_span = dst_n - c.dst_off;
      cpu().copy_rows(dst.slice(c.dst_off, {dst_span}), c.dst_stride,
                      src.slice(c.src_off, {src_span}), c.src_stride, c.rows, c.row_elems);
      gpu().copy_rows(gdst.slice(c.dst_off, {dst_span}), c.dst_stride,
                      gsrc.slice(c.src_off, {src_span}), c.src_stride, c.rows, c.row_elems);
      expect_equal(op, "buffer", gdst, dst);
    });
  }
}

TEST_CASE("cuda copy_channels: option-A padding's copies like the CPU's, nothing else written") {
  std::cout << "[copy_channels] identical buffers\n";
  struct Case {
    Shape src, dst;
    int64_t src_first, dst_first, channels;
  };
  const Case cases[] = {
      {{4, 16, 8, 8}, {4, 32, 8, 8}, 0, 8, 16},  // ResNet-20's 16 → 32 padding, forward
      {{4, 32, 8, 8}, {4, 16, 8, 8}, 8, 0, 16},  // and its backward
      {{3, 5, 7, 3}, {3, 9, 7, 3}, 1, 4, 3},     // nothing aligned
      {{2, 4, 1, 1}, {2, 4, 1, 1}, 0, 0, 4},     // a whole [N, C, 1, 1]
  };
  for (const Case& c : cases) {
    const std::string op = "copy_channels " + std::to_string(c.channels) + " of " + c.src.str() +
                           " from " + std::to_string(c.src_first) + " to " + c.dst.str() + " at " +
                           std::to_string(c.dst_first);
    run_case(op, [&] {
      const Tensor src = host_normal(c.src), gsrc = to_gpu(src);
      Tensor dst = host_normal(c.dst);
      const Tensor gdst = to_gpu(dst);
      cpu().copy_channels(dst, c.dst_first, src, c.src_first, c.channels, 1);
      gpu().copy_channels(gdst, c.dst_first, gsrc, c.src_first, c.channels, 1);
      expect_equal(op, "buffer", gdst, dst);
    });
  }
}

TEST_CASE("cuda add, add_relu, axpy, axpby, scale: the CPU's results") {
  std::cout << "[add, add_relu, scale] identical; [axpy, axpby] within 4 ulps of the terms\n";
  for (int64_t n : {1, 7, 1000003})
    for (int64_t off : {0, 1}) {
      const std::string at = " n " + std::to_string(n) + " at +" + std::to_string(off);
      run_case("add/axpy/axpby/scale" + at, [&] {
        const Tensor a = host_normal({n + off}), b = host_normal({n + off}, 3.0f);
        const Tensor ga = to_gpu(a), gb = to_gpu(b);
        auto view = [&](const Tensor& t) { return t.slice(off, {n}); };

        Tensor out = Tensor::zeros({n + off});
        const Tensor gout = gpu_nans({n + off});
        cpu().add(view(a), view(b), view(out));
        gpu().add(view(ga), view(gb), view(gout));
        expect_equal("add" + at, "out", view(gout), view(out));
        Tensor relu_out = Tensor::zeros({n + off});
        const Tensor grelu_out = gpu_nans({n + off});
        cpu().add_relu(view(a), view(b), view(relu_out));
        gpu().add_relu(view(ga), view(gb), view(grelu_out));
        expect_equal("add_relu" + at, "out", view(grelu_out), view(relu_out));

        for (float alpha : {1.0f, 0.37f}) {
          Tensor y = copy_of(b);
          const Tensor gy = to_gpu(y);
          std::vector<double> terms(n);
          for (int64_t i = 0; i < n; ++i)
            terms[i] = std::fabs(static_cast<double>(y.data<float>()[off + i])) +
                       std::fabs(static_cast<double>(alpha) * a.data<float>()[off + i]);
          cpu().axpy(alpha, view(a), view(y));
          gpu().axpy(alpha, view(ga), view(gy));
          expect_within_ulps("axpy alpha " + fnum(alpha) + at, "y", view(gy), view(y), terms, 4);
        }

        const float alpha = -1.25f, beta = 0.9f;
        Tensor y = copy_of(b);
        const Tensor gy = to_gpu(y);
        std::vector<double> terms(n);
        for (int64_t i = 0; i < n; ++i)
          terms[i] = std::fabs(static_cast<double>(alpha) * a.data<float>()[off + i]) +
                     std::fabs(static_cast<double>(beta) * y.data<float>()[off + i]);
        cpu().axpby(alpha, view(a), beta, view(y));
        gpu().axpby(alpha, view(ga), beta, view(gy));
        expect_within_ulps("axpby" + at, "y", view(gy), view(y), terms, 4);

        Tensor x = copy_of(a);
        const Tensor gx = to_gpu(x);
        cpu().scale(view(x), 0.1f);
        gpu().scale(view(gx), 0.1f);
        expect_equal("scale" + at, "x", view(gx), view(x));
      });
    }
}

// The optimizers' fused passes (backend/flat_pass.h, optim/rule_passes.h): every row of the
// optimizer table in every variant of its rule, stepped on the CPU and on the GPU from identical
// weights, gradients and state (before each step the GPU gets the CPU's), and SAPipe's passes of
// weight prediction and HPSGD's accumulating step the same way. The functors are the same code on
// both sides, so only rounding (no FMA on the GPU) separates them.
std::vector<std::pair<std::string, OptimizerChoice>> optimizer_variants() {
  std::vector<std::pair<std::string, OptimizerChoice>> v;
  for (const OptimizerEntry& row : optimizers())
    v.emplace_back(row.name, OptimizerChoice(row.name));
  OptimizerChoice plain("sgd"), damped("sgd"), nesterov("sgd"), adamw_high("adamw"),
      decayed_lion("lion");
  plain.get<SgdOptions>() = {0.0, 0.0, 0.01, false};
  damped.get<SgdOptions>() = {0.9, 0.1, 5e-4, false};
  nesterov.get<SgdOptions>() = {0.9, 0.0, 1e-4, true};
  adamw_high.get<AdamWOptions>() = {.weight_decay = 0.1, .betas = {0.3, 0.95}, .eps = 1e-8};
  decayed_lion.get<LionOptions>().weight_decay = 1.0;
  v.emplace_back("sgd plain, weight decay", plain);
  v.emplace_back("sgd momentum, dampening, weight decay", damped);
  v.emplace_back("sgd nesterov", nesterov);
  v.emplace_back("adamw beta1 0.3, weight decay", adamw_high);
  v.emplace_back("lion weight decay", decayed_lion);
  return v;
}

// The optimizer's state on the GPU ← the CPU's.
void copy_state(Optimizer& gpu_opt, const Optimizer& cpu_opt) {
  const auto from = cpu_opt.state_buffers(), to = gpu_opt.state_buffers();
  REQUIRE(from.size() == to.size());
  for (size_t k = 0; k < from.size(); ++k) gpu().copy(to[k].second, from[k].second);
  for (const auto& [name, value] : cpu_opt.counters()) gpu_opt.load_counter(name, value);
}

void expect_state_close(const std::string& at, const Optimizer& gpu_opt, const Optimizer& cpu_opt) {
  const auto g = gpu_opt.state_buffers(), c = cpu_opt.state_buffers();
  for (size_t k = 0; k < c.size(); ++k)
    expect_close(at, c[k].first, g[k].second, c[k].second, 1e-6);
}

TEST_CASE("cuda optimizer steps: every row and variant, the CPU's update over three steps") {
  std::cout << "[optimizer steps] w and state within 1e-6 of max |cpu|, g unchanged\n";
  const int64_t n = 100003, half = n / 2;
  const std::vector<DecayRange> decay{{0, half, true}, {half, n - half, false}};
  for (const auto& [name, choice] : optimizer_variants()) {
    const std::string op = "step " + name + " n " + std::to_string(n);
    run_case(op, [&] {
      Tensor w = host_normal({n}), g = host_normal({n}, 0.1f);
      const Tensor gw = to_gpu(w), gg = to_gpu(g);
      auto on_cpu = make_optimizer(choice, cpu(), w, g, decay);
      auto on_gpu = make_optimizer(choice, gpu(), gw, gg, decay);
      for (int step = 1; step <= 3; ++step) {
        cpu().copy(g, host_normal({n}, 0.1f, 0.01f * static_cast<float>(step)));
        gpu().copy(gg, g);
        gpu().copy(gw, w);
        copy_state(*on_gpu, *on_cpu);
        on_cpu->step(1e-3f);
        on_gpu->step(1e-3f);
        const std::string at = op + " step " + std::to_string(step);
        expect_close(at, "w", gw, w, 1e-6);
        expect_state_close(at, *on_gpu, *on_cpu);
        expect_equal(at, "g (unchanged)", gg, g);
      }
    });
  }
}

TEST_CASE("cuda weight prediction: every row's SAPipe passes against the CPU's") {
  std::cout << "[weight prediction] outputs within 1e-6 of max |cpu|, changes and sums 1e-3\n";
  const int64_t n = 100003;
  for (const auto& [name, choice] : optimizer_variants()) {
    const std::string op = "prediction " + name;
    run_case(op, [&] {
      Tensor w = host_normal({n}), g = host_normal({n}, 0.1f);
      const Tensor gw = to_gpu(w), gg = to_gpu(g);
      auto on_cpu = make_optimizer(choice, cpu(), w, g, {});
      auto on_gpu = make_optimizer(choice, gpu(), gw, gg, {});
      on_cpu->step(1e-3f);  // a state that is not zero
      gpu().copy(gw, w);
      copy_state(*on_gpu, *on_cpu);
      WeightPrediction& cp = *on_cpu->prediction();
      WeightPrediction& gp = *on_gpu->prediction();
      const Tensor x = host_normal({n}, 0.1f), other = host_normal({n}, 0.1f);
      const Tensor gx = to_gpu(x), gother = to_gpu(other);
      Tensor out = host_filled({n}, 0.0f);
      const Tensor gout = gpu().zeros({n});
      // The next step's weights, nothing changed.
      cp.predict_range(1e-3f, out, w, g, 0, n);
      gp.predict_range(1e-3f, gout, gw, gg, 0, n);
      expect_close(op + " predict", "x~", gout, out, 1e-6);
      expect_close(op + " predict", "w (unchanged)", gw, w, 0.0);
      // Step, then predict the step after with x, in one pass.
      on_cpu->begin_step();
      on_gpu->begin_step();
      cp.step_predict_range(1e-3f, w, g, x, out, 0, n);
      gp.step_predict_range(1e-3f, gw, gg, gx, gout, 0, n);
      expect_close(op + " step_predict", "w", gw, w, 1e-6);
      expect_close(op + " step_predict", "x~", gout, out, 1e-6);
      expect_state_close(op + " step_predict", *on_gpu, *on_cpu);
      // The step with its change.
      gpu().copy(gw, w);
      copy_state(*on_gpu, *on_cpu);
      Tensor delta = host_filled({n}, 0.0f);
      const Tensor gdelta = gpu().zeros({n});
      on_cpu->begin_step();
      on_gpu->begin_step();
      cp.step_range_delta(1e-3f, w, g, delta, 0, n);
      gp.step_range_delta(1e-3f, gw, gg, gdelta, 0, n);
      expect_close(op + " step_delta", "w", gw, w, 1e-6);
      // Δ = new − old: an ulp of w (FMA on the CPU, none on the GPU) against a step of lr's size.
      expect_close(op + " step_delta", "delta", gdelta, delta, 1e-3);
      // wp3's sum pass and its prediction with α·x + β·g.
      gpu().copy(gw, w);
      copy_state(*on_gpu, *on_cpu);
      const Tensor scratch = cpu().empty({n}), gscratch = gpu().empty({n});
      on_cpu->begin_step();
      on_gpu->begin_step();
      const double expected = cp.step_range_dot(1e-3f, w, g, -0.5f, other, scratch, 0, n);
      const double got = gp.step_range_dot(1e-3f, gw, gg, -0.5f, gother, gscratch, 0, n);
      CHECK(std::fabs(got - expected) <= 1e-3 * (1e-12 + std::fabs(expected)));
      expect_close(op + " step_dot", "w", gw, w, 1e-6);
      expect_close(op + " step_dot", "g + a*other", gg, g, 1e-6);
      cp.predict_range_sum(1e-3f, out, w, GradientSum{0.25f, x, 1.5f, g}, 0, n);
      gp.predict_range_sum(1e-3f, gout, gw, GradientSum{0.25f, gx, 1.5f, gg}, 0, n);
      expect_close(op + " predict_sum", "x~", gout, out, 1e-6);
    });
  }
}

TEST_CASE("cuda sgd_step_accumulate: with and without weight decay, keeping or adding ĝ") {
  std::cout << "[sgd_step_accumulate] w and sum within 8 ulps of the terms, g unchanged\n";
  const int64_t n = 100003;
  for (const float wd : {0.0f, 1e-2f}) {
    for (const bool add : {false, true}) {
      const std::string op = "sgd_step_accumulate wd " + std::to_string(wd) +
                             (add ? " add" : " keep") + " n " + std::to_string(n);
      run_case(op, [&] {
        Tensor w = host_normal({n}), a = host_normal({n}, 0.1f);
        const Tensor g = host_normal({n}, 0.1f);
        const Tensor gw = to_gpu(w), gg = to_gpu(g), ga = to_gpu(a);
        std::vector<double> sw(n), sa(n);
        for (int64_t i = 0; i < n; ++i) {
          const double wi = w.data<float>()[i];
          const double sg = std::fabs(g.data<float>()[i]) + std::fabs(wd * wi);
          sa[i] = (add ? std::fabs(a.data<float>()[i]) : 0.0) + sg;
          sw[i] = std::fabs(wi) + 0.1 * sg;
        }
        sgd_step_accumulate(cpu(), w, g, a, 0.1f, wd, add);
        sgd_step_accumulate(gpu(), gw, gg, ga, 0.1f, wd, add);
        expect_within_ulps(op, "w", gw, w, sw, 8);
        expect_within_ulps(op, "sum", ga, a, sa, 8);
        expect_equal(op, "g (unchanged)", gg, g);
      });
    }
  }
}

TEST_CASE("cuda dot and dc_diagonal (SAPipe's compensation)") {
  std::cout << "[sapipe ops] dot to 1e-9 relative, dc_diagonal within 8 ulps\n";
  const int64_t n = 100003;
  run_case("dot and dc_diagonal", [&] {
    const Tensor a = host_normal({n}), b = host_normal({n});
    const Tensor ga = to_gpu(a), gb = to_gpu(b);
    const double expected = cpu().dot(a, b);
    const double got = gpu().dot(ga, gb);
    CHECK(std::fabs(got - expected) <= 1e-9 * (1 + std::fabs(expected)));
    CHECK(gpu().dot(ga, gb) == got);  // the same order every time
    Tensor g = host_normal({n}, 0.1f);
    const Tensor gg = to_gpu(g);
    std::vector<double> scale(n);
    for (int64_t i = 0; i < n; ++i)
      scale[i] = std::fabs(g.data<float>()[i]) *
                 (1 + 0.2 * std::fabs(g.data<float>()[i] * a.data<float>()[i]));
    cpu().dc_diagonal(g, a, 0.2f);
    gpu().dc_diagonal(gg, ga, 0.2f);
    expect_within_ulps("dc_diagonal", "g", gg, g, scale, 8);
  });
}

TEST_CASE("cuda backend: identity, memory on the GPU, pinned host memory") {
  Backend& g = gpu();
  std::cout << "[backend] " << g.name() << "\n";
  CHECK(g.device() == Device::cuda);
  CHECK(g.name().find("cuda") != std::string::npos);
  CHECK(g.native_stream() != nullptr);
  CHECK(g.device_index() == 0);
  CHECK(g.empty({3}).device() == Device::cuda);
  CHECK(g.host_allocator().device() == Device::cpu);
  const Tensor z = g.zeros({5, 3});
  const Tensor h = to_host(z);
  for (int64_t i = 0; i < 15; ++i) CHECK(h.data<float>()[i] == 0.0f);
}

}  // namespace
