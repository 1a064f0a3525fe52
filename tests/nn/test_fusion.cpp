// ReLU fusion: a ReLU is folded into the Linear/Conv2d that produces it when nothing else reads
// that producer. The fused graph must compute what the unfused one does (outputs and every
// gradient, up to rounding), pass the finite-difference checks, and say what it fused.
#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

struct Run {
  std::vector<float> output, input_grad, param_grad;
};

Run run_graph(const std::string& yaml, const Shape& input_shape, bool fuse) {
  auto backend = cpu();
  Graph g(nodes(yaml), input_shape, fuse);
  g.materialize(*backend, 7, /*input_gradient=*/true);
  Tensor x = random_tensor(input_shape, 1);
  Run r;
  r.output = to_vector(g.forward(x));
  Tensor dy = random_tensor(g.output_shape(), 2);
  backend->copy(g.output_gradient(), dy);
  g.backward();
  r.input_grad = to_vector(g.input_gradient());
  r.param_grad = to_vector(g.gradients());
  return r;
}

void check_close(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  double scale = 1e-6;
  for (float v : b) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += std::fabs(a[i] - b[i]) > 1e-5 * scale;
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << a.size() << " differ");
}

void check_same_as_unfused(const std::string& yaml, const Shape& input_shape) {
  const Run fused = run_graph(yaml, input_shape, true);
  const Run plain = run_graph(yaml, input_shape, false);
  check_close(fused.output, plain.output, "output");
  check_close(fused.input_grad, plain.input_grad, "d/dinput");
  check_close(fused.param_grad, plain.param_grad, "d/dparams");
}

// LeNet's layer pattern at a small batch: conv → relu → pool twice, then linear → relu.
const char* kLenetLike = R"([
  {name: c1, type: conv2d, out_channels: 6, kernel: 5, padding: 2},
  {name: r1, type: relu},
  {name: s2, type: maxpool2d, kernel: 2},
  {name: c3, type: conv2d, out_channels: 16, kernel: 5},
  {name: r2, type: relu},
  {name: s4, type: maxpool2d, kernel: 2},
  {name: f, type: flatten},
  {name: f5, type: linear, out_features: 12},
  {name: r3, type: relu},
  {name: f6, type: linear, out_features: 5}])";

}  // namespace

TEST_CASE("fused and unfused graphs compute the same outputs and gradients") {
  check_same_as_unfused(kLenetLike, {3, 1, 16, 16});
  // Wider convolutions (oneDNN's blocked kernels), a strided one, and a ReLU as the output.
  check_same_as_unfused(R"([
    {name: c1, type: conv2d, out_channels: 32, kernel: 3, padding: 1},
    {name: r1, type: relu},
    {name: c2, type: conv2d, out_channels: 24, kernel: 3, stride: 2, padding: 1},
    {name: r2, type: relu},
    {name: f, type: flatten},
    {name: fc, type: linear, out_features: 7},
    {name: r3, type: relu}])",
                        {2, 20, 8, 8});
  // Caffe's order, convolution → max pool → ReLU: the ReLU moves into the convolution (the pool
  // commutes with it); blocked and plain, with windows whose maximum is negative.
  check_same_as_unfused(R"([
    {name: c1, type: conv2d, out_channels: 32, kernel: 3, padding: 1},
    {name: p1, type: maxpool2d, kernel: 3, stride: 2, ceil_mode: true},
    {name: r1, type: relu},
    {name: c2, type: conv2d, out_channels: 3, kernel: 3},
    {name: p2, type: maxpool2d, kernel: 2},
    {name: r2, type: relu},
    {name: f, type: flatten},
    {name: fc, type: linear, out_features: 4}])",
                        {2, 3, 12, 12});
  // Two fused convolutions whose gradients are one buffer (the add passes it to both): the one
  // that runs backward first must not mask it in place for the other.
  check_same_as_unfused(R"([
    {name: c1, type: conv2d, out_channels: 32, kernel: 3, padding: 1},
    {name: r1, type: relu},
    {name: c2, type: conv2d, out_channels: 32, kernel: 1, inputs: [input]},
    {name: r2, type: relu},
    {name: s, type: add, inputs: [r1, r2]},
    {name: f, type: flatten},
    {name: fc, type: linear, out_features: 3}])",
                        {2, 16, 6, 6});
  // ResNet's block: the ReLU after the add fuses into it (one pass forward, the gradient masked
  // in place where the branch and the shortcut read it); blocked and plain, and the shortcut
  // also read by the next block.
  for (const int channels : {16, 3})
    check_same_as_unfused(R"([
      {name: c0, type: conv2d, out_channels: )" +
                              std::to_string(channels) + R"(, kernel: 3, padding: 1},
      {name: r0, type: relu},
      {name: c1, type: conv2d, out_channels: )" +
                              std::to_string(channels) + R"(, kernel: 3, padding: 1},
      {name: b1, type: batchnorm2d},
      {name: s1, type: add, inputs: [b1, r0]},
      {name: r1, type: relu},
      {name: c2, type: conv2d, out_channels: )" +
                              std::to_string(channels) + R"(, kernel: 3, padding: 1},
      {name: s2, type: add, inputs: [c2, r1]},
      {name: r2, type: relu},
      {name: f, type: flatten},
      {name: fc, type: linear, out_features: 3}])",
                          {2, 5, 6, 6});
  // A producer read twice is not fused: the add needs the pre-activation.
  check_same_as_unfused(R"([
    {name: fc1, type: linear, out_features: 6},
    {name: r1, type: relu},
    {name: s, type: add, inputs: [fc1, r1]},
    {name: fc2, type: linear, out_features: 3}])",
                        {4, 5});
}

TEST_CASE("fused ReLU gradients against finite differences") {
  GraphCheck opt;
  opt.step = 1e-3f;
  check_graph_gradients(kLenetLike, {2, 1, 12, 12}, opt);
  check_graph_gradients(R"([
    {name: fc1, type: linear, out_features: 9},
    {name: r1, type: relu},
    {name: fc2, type: linear, out_features: 4},
    {name: r2, type: relu}])",
                        {5, 7}, opt);
}

TEST_CASE("the summary marks fused ReLUs; only single-reader producers fuse") {
  Graph g(nodes(R"([
    {name: c1, type: conv2d, out_channels: 4, kernel: 3},
    {name: r1, type: relu},
    {name: fc1, type: linear, out_features: 6},
    {name: r2, type: relu},
    {name: s, type: add, inputs: [fc1, r2]},
    {name: r3, type: relu}])"),
          {2, 1, 6, 6});
  const std::string s = g.summary();
  auto line = [&](const std::string& name) {
    const size_t at = s.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return s.substr(at + 1, s.find('\n', at + 1) - at - 1);
  };
  CHECK(line("r1").find("relu (fused)") != std::string::npos);
  CHECK(line("r2").find("fused") == std::string::npos);  // fc1 is also read by the add
  // The add may not absorb it: its gradient is the caller's, which the add would mask in place.
  CHECK(line("r3").find("fused") == std::string::npos);
  Graph block(nodes(R"([
    {name: c1, type: conv2d, out_channels: 4, kernel: 3, padding: 1},
    {name: s, type: add, inputs: [c1, input]},
    {name: r, type: relu},
    {name: f, type: flatten},
    {name: fc, type: linear, out_features: 2}])"),
              {2, 4, 5, 5});
  CHECK(block.summary().find("r                      relu (fused)") != std::string::npos);
  Graph passed(nodes(R"([
    {name: c1, type: conv2d, out_channels: 4, kernel: 3, padding: 1},
    {name: s, type: add, inputs: [c1, input]},
    {name: r, type: relu},
    {name: s2, type: add, inputs: [r, input]}])"),
               {2, 4, 5, 5});  // r's gradient is s2's, which passes it through: the caller's
  CHECK(passed.summary().find("relu (fused)") == std::string::npos);
  // Through a max pool into the convolution before it; not through an average pool.
  Graph pooled(nodes(R"([
    {name: c1, type: conv2d, out_channels: 4, kernel: 3},
    {name: p1, type: maxpool2d, kernel: 2},
    {name: r1, type: relu},
    {name: c2, type: conv2d, out_channels: 4, kernel: 1},
    {name: p2, type: avgpool2d, kernel: 2},
    {name: r2, type: relu}])"),
               {2, 1, 10, 10});
  const std::string ps = pooled.summary();
  CHECK(ps.find("r1                     relu (fused)") != std::string::npos);
  CHECK(ps.find("r2                     relu (fused)") == std::string::npos);
  Graph unfused(
      nodes("[{name: c, type: conv2d, out_channels: 2, kernel: 3}, {name: r, type: relu}]"),
      {1, 1, 4, 4}, false);
  CHECK(unfused.summary().find("fused") == std::string::npos);
}
