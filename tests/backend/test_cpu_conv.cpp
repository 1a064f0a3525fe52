// Conv2d on the CPU backend against double-precision references, element by element: the
// forward and all three gradients, with and without a fused ReLU, through oneDNN, through the
// direct kernels and through the per-pass choice, on one and two threads.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/blocked_weight_grad.h"  // blocked_weight_grad_suits
#include "backend/cpu/cpu_ops.h"              // make_conv with a forced path
#include "backend/cpu/direct_conv.h"          // direct_conv_suits
#include "core/rng.h"
#include "reference_ops.h"

using namespace dtrain;

namespace {

Tensor random_tensor(const Shape& s, uint64_t stream) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = random_uniform(5, stream, i) - 0.5f;
  return t;
}

// max |a − r| relative to max |r|.
double rel_error(const Tensor& a, const std::vector<double>& r) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < r.size(); ++i) {
    err = std::max(err, std::fabs(a.data<float>()[i] - r[i]));
    scale = std::max(scale, std::fabs(r[i]));
  }
  return err / scale;
}

std::string describe(const ConvSpec& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.in_channels) + "x" +
         std::to_string(s.height) + "x" + std::to_string(s.width) + " → " +
         std::to_string(s.out_channels) + " k" + std::to_string(s.kernel_h) + "x" +
         std::to_string(s.kernel_w) + " s" + std::to_string(s.stride_h) + " p" +
         std::to_string(s.pad_h) + "," + std::to_string(s.pad_w) + (s.bias ? "" : " nobias") +
         (s.relu ? " relu" : "");
}

void check_conv(ConvOp& op, const ConvSpec& s) {
  Tensor x = random_tensor(s.input_shape(), 1), w = random_tensor(s.weight_shape(), 2);
  Tensor b = random_tensor({s.out_channels}, 3), y = Tensor::empty(s.output_shape());
  op.forward(x, w, b, y);
  auto ref =
      test::ref_conv(s, x.data<float>(), w.data<float>(), s.bias ? b.data<float>() : nullptr);
  if (s.relu)
    for (double& v : ref) v = std::max(v, 0.0);
  CHECK(rel_error(y, ref) < 1e-5);

  // Gradients for g masked where the activated output is not positive.
  Tensor g = random_tensor(s.output_shape(), 4);
  std::vector<double> gm(g.numel());
  for (int64_t i = 0; i < g.numel(); ++i)
    gm[i] = !s.relu || y.data<float>()[i] > 0 ? g.data<float>()[i] : 0.0;
  const auto expect = test::ref_conv_grads(s, x.data<float>(), w.data<float>(), gm);
  Tensor dx = Tensor::empty(s.input_shape()), dw = Tensor::empty(s.weight_shape());
  Tensor db = Tensor::empty({s.out_channels});
  op.backward_data(y, g, w, dx);
  op.backward_weights(x, y, g, dw, s.bias ? db : Tensor());
  CHECK(rel_error(dx, expect.dx) < 1e-5);
  CHECK(rel_error(dw, expect.dw) < 1e-5);
  if (s.bias) CHECK(rel_error(db, expect.db) < 1e-5);
}

const ConvSpec kSpecs[] = {
    {2, 3, 9, 8, 4, 3, 3, 1, 1, 1, 1, true},    {2, 16, 7, 7, 16, 3, 3, 2, 2, 1, 1, true},
    {1, 8, 6, 6, 24, 1, 1, 1, 1, 0, 0, false},  {3, 1, 10, 10, 6, 5, 5, 1, 1, 2, 2, true},
    {4, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, true},   // LeNet C1
    {4, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, true},  // LeNet C3
    {2, 5, 11, 70, 9, 3, 3, 1, 1, 0, 1, true},   // rows longer than one tile
    {3, 2, 7, 40, 3, 5, 5, 1, 1, 1, 2, false},   // asymmetric padding
    {2, 3, 9, 19, 17, 7, 7, 1, 1, 3, 3, true},   // more output channels than one block
    {2, 18, 6, 9, 5, 2, 4, 1, 1, 1, 3, true},    // even kernel sizes
    {2, 4, 5, 33, 2, 6, 1, 1, 1, 5, 0, true},    // a kernel taller than the image
};

}  // namespace

TEST_CASE("conv2d through the backend: forward and gradients, plain and fused ReLU") {
  for (int threads : {1, 2}) {
    auto be = make_backend({DeviceChoice::cpu, threads, 0});
    for (ConvSpec s : kSpecs)
      for (bool relu : {false, true}) {
        s.relu = relu;
        CAPTURE(threads);
        CAPTURE(describe(s));
        auto op = be->make_conv(s);
        check_conv(*op, s);
      }
  }
}

TEST_CASE("conv2d: oneDNN and direct kernels each match the reference") {
  auto be = make_backend({DeviceChoice::cpu, 1, 0});  // one thread
  cpu::DnnlContext ctx;
  for (ConvSpec s : kSpecs)
    for (bool relu : {false, true}) {
      s.relu = relu;
      CAPTURE(describe(s));
      auto dnnl = cpu::make_conv(ctx, s, cpu::ConvPath::dnnl);
      check_conv(*dnnl, s);
      if (!cpu::direct_conv_supports(s)) continue;
      auto direct = cpu::make_conv(ctx, s, cpu::ConvPath::direct);
      check_conv(*direct, s);
    }
}

// The op on activations in blocks of 16 channels: x, y, dy and dx reordered at the boundary,
// weights and their gradient plain (as the layers pass them), against the same references.
void check_blocked_conv(Backend& be, ConvOp& op, const ConvSpec& s) {
  Tensor x = random_tensor(s.input_shape(), 1), w = random_tensor(s.weight_shape(), 2);
  Tensor b = random_tensor({s.out_channels}, 3), g = random_tensor(s.output_shape(), 4);
  Tensor xb = Tensor::empty(s.input_shape()), gb = Tensor::empty(s.output_shape());
  be.reorder(xb, 16, x, 1);
  be.reorder(gb, 16, g, 1);
  Tensor yb = Tensor::empty(s.output_shape()), y = Tensor::empty(s.output_shape());
  op.forward(xb, w, b, yb);
  be.reorder(y, 1, yb, 16);
  std::vector<double> gm(g.numel());
  for (int64_t i = 0; i < g.numel(); ++i)
    gm[i] = !s.relu || y.data<float>()[i] > 0 ? g.data<float>()[i] : 0.0;
  const auto expect = test::ref_conv_grads(s, x.data<float>(), w.data<float>(), gm);
  Tensor dw = Tensor::empty(s.weight_shape()), db = Tensor::empty({s.out_channels});
  Tensor dxb = Tensor::empty(s.input_shape()), dx = Tensor::empty(s.input_shape());
  op.backward_weights(xb, yb, gb, dw, s.bias ? db : Tensor());
  op.backward_data(yb, gb, w, dxb);
  be.reorder(dx, 1, dxb, 16);
  CHECK(rel_error(dw, expect.dw) < 1e-5);
  if (s.bias) CHECK(rel_error(db, expect.db) < 1e-5);
  CHECK(rel_error(dx, expect.dx) < 1e-5);
}

TEST_CASE("conv2d on blocks of 16 channels: the own weight-gradient kernel matches the reference") {
  // Rows of 32+ outputs, stride 1: the shapes BlockedWeightGrad takes.
  const ConvSpec specs[] = {
      {3, 16, 32, 32, 16, 3, 3, 1, 1, 1, 1, false},  // ResNet-20's first stage
      {2, 32, 5, 34, 16, 3, 3, 1, 1, 0, 1, true},    // two input blocks, asymmetric padding
      {2, 16, 6, 34, 32, 5, 3, 1, 1, 2, 0, true},    // two output blocks, 5×3, no column pad
      {2, 16, 3, 40, 16, 1, 1, 1, 1, 0, 0, false},   // 1×1
      {5, 16, 7, 36, 16, 3, 3, 1, 1, 1, 1, true},    // more images than threads evenly share
  };
  for (int threads : {1, 2}) {
    auto be = make_backend({DeviceChoice::cpu, threads, 0});
    for (ConvSpec s : specs)
      for (bool relu : {false, true}) {
        s.relu = relu;
        s.src_block = s.dst_block = 16;
        CAPTURE(threads);
        CAPTURE(describe(s));
        REQUIRE(cpu::blocked_weight_grad_suits(s));
        auto op = be->make_conv(s);
        check_blocked_conv(*be, *op, s);
      }
  }
  // Where it does not suit: rows under 32 outputs, strides, plain activations.
  ConvSpec s{2, 16, 16, 16, 16, 3, 3, 1, 1, 1, 1, false};
  s.src_block = s.dst_block = 16;
  CHECK_FALSE(cpu::blocked_weight_grad_suits(s));
  s.width = 64, s.stride_w = 2;
  CHECK_FALSE(cpu::blocked_weight_grad_suits(s));
  s.stride_w = 1;
  CHECK(cpu::blocked_weight_grad_suits(s));
  s.src_block = s.dst_block = 1;
  CHECK_FALSE(cpu::blocked_weight_grad_suits(s));
}

TEST_CASE("direct kernels take small channel counts and full-vector rows") {
  const ConvSpec c1{64, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, true};
  const ConvSpec c3{64, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, true};
  const ConvSpec wide{64, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, true};
  const ConvSpec rows32{64, 16, 32, 32, 16, 3, 3, 1, 1, 1, 1, true};
  const ConvSpec strided{64, 3, 32, 32, 8, 3, 3, 2, 2, 1, 1, true};
  auto p = cpu::direct_conv_suits(c1);
  CHECK((p.forward && p.backward_weights && p.backward_data));
  p = cpu::direct_conv_suits(c3);
  CHECK((!p.forward && !p.backward_weights && p.backward_data));
  p = cpu::direct_conv_suits(wide);
  CHECK((!p.forward && !p.backward_weights && !p.backward_data));
  p = cpu::direct_conv_suits(rows32);
  CHECK((p.forward && !p.backward_weights && p.backward_data));
  p = cpu::direct_conv_suits(strided);
  CHECK((!p.forward && !p.backward_weights && !p.backward_data));
}
