// Linear and Conv2d in bf16 (spec.dtype) on the CPU backend against the same ops in f32, on
// inputs that bf16 represents exactly, so that both compute the same exact products and differ
// only where bf16 stores a result:
//   y, dx (bf16): the f32 sum rounded once to bf16 (relative error ≤ 2^-9, checked at 2^-8)
//     plus the sums' different order (checked at 1e-5 of the output's largest magnitude);
//   dw, db (f32 in both): the order of the sums only (1e-5 of the largest magnitude).
// The f32 reference reads the weights rounded to bf16, as the bf16 op reads them, and in the
// backward passes the bf16 op's own output as the fused ReLU's mask, so that an output rounding
// across zero cannot move the mask between the two.
// Every case runs both ways a bf16 product computes (DTRAIN_BF16_PRODUCTS): oneDNN's bf16
// primitives (native) and the f32 ops on widened operands (widened, with all the f32 op's
// kernels: Winograd, the direct kernels, the blocked weight gradient), whose f32 reference is
// the same f32 op on the same values, so they differ only by the output's rounding.
#include <doctest/doctest.h>

#include <algorithm>  // max
#include <cmath>      // fabs
#include <cstdlib>    // getenv, setenv, unsetenv: DTRAIN_BF16_PRODUCTS
#include <string>

#include "backend/cpu/bf16.h"          // f32_to_bf16, round_to_bf16
#include "backend/cpu/bf16_widened.h"  // bf16_products
#include "backend/cpu/cpu_backend.h"   // CpuBackend
#include "backend/cpu/cpu_ops.h"       // make_conv with a forced path
#include "bf16_tensors.h"              // to_bf16, to_f32: the reference casts
#include "core/error.h"                // InputError
#include "core/rng.h"                  // random_uniform

using namespace dtrain;

using dtrain::test::to_bf16;
using dtrain::test::to_f32;

namespace {

// Sets DTRAIN_BF16_PRODUCTS for the ops built in its scope (make_conv and make_linear read it
// when they build an op); null unsets it.
class ProductsEnv {
 public:
  explicit ProductsEnv(const char* value) {
    if (const char* old = std::getenv("DTRAIN_BF16_PRODUCTS")) old_ = old, had_ = true;
    set(value);
  }
  ~ProductsEnv() { set(had_ ? old_.c_str() : nullptr); }
  ProductsEnv(const ProductsEnv&) = delete;
  ProductsEnv& operator=(const ProductsEnv&) = delete;

 private:
  static void set(const char* value) {
    if (value != nullptr)
      ::setenv("DTRAIN_BF16_PRODUCTS", value, 1);
    else
      ::unsetenv("DTRAIN_BF16_PRODUCTS");
  }
  std::string old_;
  bool had_ = false;
};

constexpr const char* kProducts[] = {"native", "widened"};

// Products round their bf16 outputs once (2^-9 relative), and both ops sum in f32 in their own
// orders: allowed |bf16 − f32| ≤ kRounding·|f32| + kOrder·max|f32|.
constexpr double kRounding = 1.0 / 256;
constexpr double kOrder = 1e-5;

// Values in [-0.5, 0.5) that bf16 represents exactly.
Tensor bf16_exact(const Shape& s, uint64_t stream) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = cpu::round_to_bf16(random_uniform(11, stream, i) - 0.5f);
  return t;
}

// |got − ref| ≤ rounding·|ref| + kOrder·max|ref| everywhere (rounding: kRounding for outputs
// stored in bf16, 0 for f32 ones).
void check_close(const Tensor& got, const Tensor& ref, double rounding, const std::string& what) {
  REQUIRE(got.dtype() == DType::f32);
  REQUIRE(got.numel() == ref.numel());
  double scale = 0;
  for (int64_t i = 0; i < ref.numel(); ++i)
    scale = std::max(scale, std::fabs(double(ref.data<float>()[i])));
  int64_t bad = 0, worst = 0;
  double worst_excess = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.data<float>()[i], g = got.data<float>()[i];
    const double excess = std::fabs(g - r) / (rounding * std::fabs(r) + kOrder * scale);
    if (!(excess <= 1)) ++bad;
    if (!(excess <= worst_excess)) worst_excess = excess, worst = i;
  }
  INFO(what << ": " << bad << " of " << ref.numel() << " outside the tolerance; worst at " << worst
            << ": " << got.data<float>()[worst] << " against " << ref.data<float>()[worst]
            << " (scale " << scale << ")");
  CHECK(bad == 0);
  CHECK(scale > 0);  // the comparison saw real values
}

bool skip_without_bf16() {
  const std::string why = CpuBackend().bf16_unavailable();
  if (why.empty()) return false;
  MESSAGE("skipped: " << why);
  return true;
}

std::string describe(const LinearSpec& s) {
  return "linear " + std::to_string(s.batch) + "x" + std::to_string(s.in_features) + " → " +
         std::to_string(s.out_features) + (s.bias ? "" : " nobias") + (s.relu ? " relu" : "");
}

void compare_linear(const LinearSpec& s) {
  CAPTURE(describe(s));
  CpuBackend be;
  LinearSpec s16 = s;
  s16.dtype = DType::bf16;
  auto f32_op = be.make_linear(s), bf16_op = be.make_linear(s16);
  const Shape xs{s.batch, s.in_features}, ys{s.batch, s.out_features};
  const Tensor x = bf16_exact(xs, 1), w = bf16_exact({s.out_features, s.in_features}, 2);
  const Tensor b = bf16_exact({s.out_features}, 3), dy = bf16_exact(ys, 4);
  const Tensor no_b;

  Tensor y = Tensor::empty(ys), y16 = Tensor::empty(ys, DType::bf16);
  f32_op->forward(x, w, s.bias ? b : no_b, y);
  bf16_op->forward(to_bf16(x), w, s.bias ? b : no_b, y16);
  check_close(to_f32(y16), y, kRounding, "y");

  // Both backward passes mask with the bf16 op's output (see the top of the file).
  const Tensor y_mask = to_f32(y16);
  Tensor dx = Tensor::empty(xs), dw = Tensor::empty(w.shape()), db = Tensor::empty(b.shape());
  Tensor dx16 = Tensor::empty(xs, DType::bf16), dw16 = Tensor::empty(w.shape());
  Tensor db16 = Tensor::empty(b.shape());
  const Tensor dy16 = to_bf16(dy);
  f32_op->backward_weights(x, y_mask, dy, dw, s.bias ? db : no_b);
  f32_op->backward_data(y_mask, dy, w, dx);
  bf16_op->backward_weights(to_bf16(x), y16, dy16, dw16, s.bias ? db16 : no_b);
  bf16_op->backward_data(y16, dy16, w, dx16);
  check_close(to_f32(dx16), dx, kRounding, "dx");
  check_close(dw16, dw, 0, "dw");
  if (s.bias) check_close(db16, db, 0, "db");
}

std::string describe(const ConvSpec& s) {
  return "conv " + std::to_string(s.batch) + "x" + std::to_string(s.in_channels) + "x" +
         std::to_string(s.height) + "x" + std::to_string(s.width) + " → " +
         std::to_string(s.out_channels) + " k" + std::to_string(s.kernel_h) + " s" +
         std::to_string(s.stride_h) + " p" + std::to_string(s.pad_h) + " blocks " +
         std::to_string(s.src_block) + "/" + std::to_string(s.dst_block) +
         (s.bias ? "" : " nobias") + (s.relu ? " relu" : "") +
         (s.dy_writable ? " dy_writable" : "");
}

// The f32 op runs in the same layouts, so that the tensors compare element by element.
void compare_conv(const ConvSpec& s) {
  CAPTURE(describe(s));
  CpuBackend be;
  ConvSpec s16 = s;
  s16.dtype = DType::bf16;
  auto f32_op = be.make_conv(s), bf16_op = be.make_conv(s16);
  const Tensor x = bf16_exact(s.input_shape(), 1), w = bf16_exact(s.weight_shape(), 2);
  const Tensor b = bf16_exact({s.out_channels}, 3), dy = bf16_exact(s.output_shape(), 4);
  const Tensor no_b;

  Tensor y = Tensor::empty(s.output_shape()), y16 = Tensor::empty(s.output_shape(), DType::bf16);
  f32_op->forward(x, w, s.bias ? b : no_b, y);
  bf16_op->forward(to_bf16(x), w, s.bias ? b : no_b, y16);
  check_close(to_f32(y16), y, kRounding, "y");

  // Fresh copies of dy: with dy_writable the ops may mask it in place.
  const Tensor y_mask = to_f32(y16), dy_f32 = bf16_exact(s.output_shape(), 4), dy16 = to_bf16(dy);
  Tensor dx = Tensor::empty(s.input_shape()), dw = Tensor::empty(s.weight_shape());
  Tensor db = Tensor::empty({s.out_channels});
  Tensor dx16 = Tensor::empty(s.input_shape(), DType::bf16), dw16 = Tensor::empty(dw.shape());
  Tensor db16 = Tensor::empty(db.shape());
  // The order of a layer's backward: the weight gradient, then the data gradient.
  f32_op->backward_weights(x, y_mask, dy_f32, dw, s.bias ? db : no_b);
  f32_op->backward_data(y_mask, dy_f32, w, dx);
  bf16_op->backward_weights(to_bf16(x), y16, dy16, dw16, s.bias ? db16 : no_b);
  bf16_op->backward_data(y16, dy16, w, dx16);
  check_close(to_f32(dx16), dx, kRounding, "dx");
  check_close(dw16, dw, 0, "dw");
  if (s.bias) check_close(db16, db, 0, "db");
}

ConvSpec conv(int64_t batch, int64_t in, int64_t size, int64_t out, int64_t kernel, int64_t stride,
              int64_t pad, bool bias, bool relu, ChannelBlock src_block, ChannelBlock dst_block) {
  ConvSpec s;
  s.batch = batch, s.in_channels = in, s.height = size, s.width = size;
  s.out_channels = out, s.kernel_h = kernel, s.kernel_w = kernel;
  s.stride_h = stride, s.stride_w = stride, s.pad_h = pad, s.pad_w = pad;
  s.bias = bias, s.relu = relu, s.src_block = src_block, s.dst_block = dst_block;
  return s;
}

}  // namespace

TEST_CASE("bf16 linear matches f32 on bf16 inputs, with f32 weight gradients") {
  if (skip_without_bf16()) return;
  for (const char* products : kProducts) {
    CAPTURE(products);
    ProductsEnv env(products);
    compare_linear({8, 32, 16, true, false});
    compare_linear({8, 32, 16, false, false});
    compare_linear({8, 32, 16, true, true});
    compare_linear({8, 32, 16, false, true});
    compare_linear({7, 37, 19, true, true});  // no multiple of 16 anywhere
    compare_linear({64, 300, 130, true, false});
    // Rows of 1720 widened bytes: more than kWideChunkBytes in all, so the widened op runs in
    // chunks of rows (the last one shorter) and sums the chunks' weight gradients.
    compare_linear({5000, 300, 130, true, true});
  }
}

TEST_CASE("bf16 conv2d matches f32 on bf16 inputs, with f32 weight gradients") {
  if (skip_without_bf16()) return;
  for (const char* products : kProducts) {
    CAPTURE(products);
    ProductsEnv env(products);
    for (ChannelBlock block : {1, 16}) {
      CAPTURE(block);
      // 3×3 pad 1 stride 1, 16 → 32 channels on 8×8.
      compare_conv(conv(2, 16, 8, 32, 3, 1, 1, true, true, block, block));
      compare_conv(conv(2, 16, 8, 32, 3, 1, 1, false, false, block, block));
      // stride 2 (odd size: the last output row and column reach the padding).
      compare_conv(conv(2, 16, 9, 32, 3, 2, 1, true, false, block, block));
      compare_conv(conv(2, 32, 8, 16, 3, 2, 1, false, true, block, block));
      // 1×1.
      compare_conv(conv(3, 16, 6, 16, 1, 1, 0, true, true, block, block));
      compare_conv(conv(3, 32, 6, 16, 1, 1, 0, false, false, block, block));
      // A first layer: 3 channels in, plain (as a network's input arrives) or not.
      compare_conv(conv(2, 3, 8, 16, 3, 1, 1, true, true, 1, block));
      compare_conv(conv(2, 3, 8, 16, 3, 1, 1, false, false, 1, block));
    }
    // Few channels, plain (LeNet's): the f32 op takes its direct kernels; the bf16 op oneDNN's
    // (native) or the same direct kernels (widened).
    compare_conv(conv(2, 6, 12, 10, 5, 1, 2, true, true, 1, 1));
    // ResNet's first stage, rows of 32: the f32 op's own blocked weight-gradient kernel.
    compare_conv(conv(2, 16, 32, 16, 3, 1, 1, true, true, 16, 16));
    // 32 → 32 channels, 3×3 stride 1 on blocks of 16: the f32 op's Winograd kernels.
    compare_conv(conv(2, 32, 8, 32, 3, 1, 1, true, true, 16, 16));
    compare_conv(conv(2, 32, 8, 32, 3, 1, 1, false, false, 16, 16));
    // 1 MB of widened input and output per image: the widened op runs 7 images in chunks of 4
    // and 3 (kWideChunkBytes) and sums the chunks' weight gradients.
    compare_conv(conv(7, 32, 64, 32, 3, 1, 1, true, true, 16, 16));
  }
}

TEST_CASE("bf16 conv2d with a fused ReLU masks a writable dy in place as it masks a copy") {
  if (skip_without_bf16()) return;
  for (const char* products : kProducts) {
    CAPTURE(products);
    ProductsEnv env(products);
    for (ChannelBlock block : {1, 16}) {
      ConvSpec s = conv(2, 16, 8, 16, 3, 1, 1, true, true, block, block);
      s.dy_writable = true;
      compare_conv(s);
    }
  }
}

TEST_CASE("bf16 linear and conv2d convert the weights they are given on every call") {
  if (skip_without_bf16()) return;
  for (const char* products : kProducts) {
    CAPTURE(products);
    ProductsEnv env(products);
    CpuBackend be;
    // The same op forward with two sets of weights: the second output follows the second set.
    {
      LinearSpec s{4, 16, 8, true, false, DType::bf16};
      auto op = be.make_linear(s);
      LinearSpec f = s;
      f.dtype = DType::f32;
      auto ref = be.make_linear(f);
      const Tensor x = bf16_exact({4, 16}, 1), b = bf16_exact({8}, 3), x16 = to_bf16(x);
      Tensor y16 = Tensor::empty({4, 8}, DType::bf16), y = Tensor::empty({4, 8});
      for (uint64_t stream : {20, 21}) {
        const Tensor w = bf16_exact({8, 16}, stream);
        op->forward(x16, w, b, y16);
        ref->forward(x, w, b, y);
        check_close(to_f32(y16), y, kRounding, "linear y, weights " + std::to_string(stream));
        const Tensor dy = bf16_exact({4, 8}, 4);
        Tensor dx16 = Tensor::empty({4, 16}, DType::bf16), dx = Tensor::empty({4, 16});
        op->backward_data(y16, to_bf16(dy), w, dx16);
        ref->backward_data(y, dy, w, dx);
        check_close(to_f32(dx16), dx, kRounding, "linear dx, weights " + std::to_string(stream));
      }
    }
    {
      ConvSpec s = conv(2, 16, 6, 16, 3, 1, 1, false, false, 16, 16);
      ConvSpec s16 = s;
      s16.dtype = DType::bf16;
      auto op = be.make_conv(s16), ref = be.make_conv(s);
      const Tensor x = bf16_exact(s.input_shape(), 1), x16 = to_bf16(x);
      Tensor y16 = Tensor::empty(s.output_shape(), DType::bf16),
             y = Tensor::empty(s.output_shape());
      for (uint64_t stream : {20, 21}) {
        const Tensor w = bf16_exact(s.weight_shape(), stream);
        op->forward(x16, w, Tensor(), y16);
        ref->forward(x, w, Tensor(), y);
        check_close(to_f32(y16), y, kRounding, "conv y, weights " + std::to_string(stream));
        const Tensor dy = bf16_exact(s.output_shape(), 4);
        Tensor dx16 = Tensor::empty(s.input_shape(), DType::bf16),
               dx = Tensor::empty(s.input_shape());
        op->backward_data(y16, to_bf16(dy), w, dx16);
        ref->backward_data(y, dy, w, dx);
        check_close(to_f32(dx16), dx, kRounding, "conv dx, weights " + std::to_string(stream));
      }
    }
  }
}

TEST_CASE("bf16 linear and conv2d refuse f32 activations and bf16 weights") {
  if (skip_without_bf16()) return;
  for (const char* products : kProducts) {
    CAPTURE(products);
    ProductsEnv env(products);
    CpuBackend be;
    auto linear = be.make_linear({4, 16, 8, true, false, DType::bf16});
    const Tensor w = Tensor::zeros({8, 16}), b = Tensor::zeros({8});
    Tensor y16 = Tensor::empty({4, 8}, DType::bf16);
    CHECK_THROWS_WITH(linear->forward(Tensor::zeros({4, 16}), w, b, y16),
                      doctest::Contains("expected 64 bf16"));
    ConvSpec s = conv(1, 16, 4, 16, 3, 1, 1, false, false, 16, 16);
    s.dtype = DType::bf16;
    auto op = be.make_conv(s);
    Tensor x16 = Tensor::zeros(s.input_shape(), DType::bf16);
    CHECK_THROWS_WITH(op->forward(x16, Tensor::zeros(s.weight_shape(), DType::bf16), Tensor(),
                                  Tensor::empty(s.output_shape(), DType::bf16)),
                      doctest::Contains("expected [16, 16, 3, 3] f32"));
  }
}

TEST_CASE("bf16 products: native refuses the f32-only direct kernels, widened runs on them") {
  if (skip_without_bf16()) return;
  cpu::DnnlContext ctx;
  ConvSpec s = conv(2, 6, 12, 10, 5, 1, 2, true, true, 1, 1);  // LeNet's few channels
  s.dtype = DType::bf16;
  {
    ProductsEnv env("native");
    CHECK_THROWS_WITH(cpu::make_conv(ctx, s, cpu::ConvPath::direct), doctest::Contains("f32 only"));
  }
  ProductsEnv env("widened");
  CHECK_NOTHROW(cpu::make_conv(ctx, s, cpu::ConvPath::direct));
}

TEST_CASE("bf16 products are widened to the f32 kernels by default on a CPU without AMX") {
  if (skip_without_bf16()) return;
  ProductsEnv env(nullptr);
  const bool amx = dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
  CHECK(cpu::bf16_products() == (amx ? cpu::Bf16Products::native : cpu::Bf16Products::widened));
  // Observable without asking: only the widened path accepts the direct kernels (f32 only).
  cpu::DnnlContext ctx;
  ConvSpec s = conv(2, 6, 12, 10, 5, 1, 2, true, true, 1, 1);
  s.dtype = DType::bf16;
  if (amx)
    CHECK_THROWS_WITH(cpu::make_conv(ctx, s, cpu::ConvPath::direct), doctest::Contains("f32 only"));
  else
    CHECK_NOTHROW(cpu::make_conv(ctx, s, cpu::ConvPath::direct));
  // And the run log says how the products compute.
  CHECK((CpuBackend().bf16_caveat().find("f32 kernels") != std::string::npos) == !amx);
}

TEST_CASE("DTRAIN_BF16_PRODUCTS takes native or widened, and names itself when wrong") {
  {
    ProductsEnv env("native");
    CHECK(cpu::bf16_products() == cpu::Bf16Products::native);
  }
  {
    ProductsEnv env("widened");
    CHECK(cpu::bf16_products() == cpu::Bf16Products::widened);
  }
  ProductsEnv env("fast");
  CHECK_THROWS_AS(cpu::bf16_products(), InputError);
  CHECK_THROWS_WITH(cpu::bf16_products(), doctest::Contains("DTRAIN_BF16_PRODUCTS=fast"));
}
