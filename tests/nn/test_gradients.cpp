// Every layer's backward against central finite differences of L = Σ y·r, with respect to the
// input and the parameters; graphs with residual adds, shared producers and batch norm; the
// softmax cross-entropy head through a whole Model.
#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

TEST_CASE("linear gradients") {
  check_graph_gradients("[{name: fc, type: linear, out_features: 4}]", {3, 5});
  check_graph_gradients("[{name: fc, type: linear, out_features: 3, bias: false}]", {2, 6});
  // A 4-D input is read as its flattened view.
  check_graph_gradients("[{name: fc, type: linear, out_features: 3, in_features: 18}]",
                        {2, 2, 3, 3});
}

TEST_CASE("conv2d gradients") {
  check_graph_gradients(
      "[{name: c, type: conv2d, out_channels: 4, kernel: 3, stride: 1, padding: 1}]", {2, 3, 5, 5});
  check_graph_gradients(
      "[{name: c, type: conv2d, out_channels: 3, kernel: 3, stride: 2, padding: 1, bias: false}]",
      {2, 2, 7, 7});
  check_graph_gradients(
      "[{name: c, type: conv2d, out_channels: 2, kernel: [3, 2], stride: [2, 1], padding: [1, 0]}]",
      {1, 2, 6, 5});
}

TEST_CASE("pooling gradients") {
  GraphCheck kinks;
  kinks.distinct_input = true;
  kinks.step = 1e-3f;
  check_graph_gradients("[{name: p, type: maxpool2d, kernel: 2}]", {2, 2, 6, 6}, kinks);
  check_graph_gradients("[{name: p, type: maxpool2d, kernel: 3, stride: 2, ceil_mode: true}]",
                        {2, 2, 8, 8}, kinks);
  check_graph_gradients("[{name: p, type: maxpool2d, kernel: 3, stride: 2, padding: 1}]",
                        {1, 2, 7, 7}, kinks);
  check_graph_gradients("[{name: p, type: avgpool2d, kernel: 2}]", {2, 2, 6, 6});
  check_graph_gradients(
      "[{name: p, type: avgpool2d, kernel: 3, stride: 2, ceil_mode: true, count_include_pad: "
      "false}]",
      {2, 2, 8, 8});
  check_graph_gradients("[{name: p, type: avgpool2d, kernel: 3, stride: 2, padding: 1}]",
                        {1, 2, 7, 7});
  check_graph_gradients("[{name: p, type: global_avgpool}]", {2, 3, 4, 5});
}

TEST_CASE("relu, lrn, dropout, flatten gradients") {
  GraphCheck kinks;
  kinks.distinct_input = true;
  kinks.step = 1e-3f;
  check_graph_gradients("[{name: r, type: relu}]", {2, 3, 4, 4}, kinks);
  check_graph_gradients("[{name: n, type: lrn, size: 3, alpha: 0.5, beta: 0.75, k: 2}]",
                        {2, 5, 3, 3});
  check_graph_gradients("[{name: d, type: dropout, p: 0.3}]", {4, 50});
  check_graph_gradients("[{name: f, type: flatten}, {name: fc, type: linear, out_features: 3}]",
                        {2, 2, 3, 3});
}

TEST_CASE("gelu gradients, exact and tanh forms") {
  GraphCheck wide;  // the curved part and the tails
  wide.input_lo = -4.0f;
  wide.input_hi = 4.0f;
  check_graph_gradients("[{name: g, type: gelu}]", {2, 3, 4, 4}, wide);
  check_graph_gradients("[{name: g, type: gelu, approximate: tanh}]", {4, 50}, wide);
  // After a convolution, where the CPU backend runs the chain channel-blocked.
  check_graph_gradients(
      "[{name: c, type: conv2d, out_channels: 16, kernel: 3, padding: 1}, {name: g, type: gelu}]",
      {2, 3, 5, 5});
}

TEST_CASE("batchnorm2d gradients") {
  GraphCheck bn;
  bn.randomise_params = true;
  check_graph_gradients("[{name: bn, type: batchnorm2d}]", {4, 3, 3, 3}, bn);
  check_graph_gradients("[{name: bn, type: batchnorm2d}]", {6, 4}, bn);
}

TEST_CASE("channel_pad gradients") {
  check_graph_gradients("[{name: s, type: channel_pad, out_channels: 6, stride: 2}]", {2, 2, 6, 6});
  check_graph_gradients("[{name: s, type: channel_pad, out_channels: 5, stride: 1}]", {2, 3, 3, 3});
}

TEST_CASE("residual graph with batch norm: shared producers accumulate gradients") {
  GraphCheck opt;
  opt.randomise_params = true;
  opt.step = 5e-4f;
  check_graph_gradients(R"([
    {name: c1, type: conv2d, out_channels: 4, kernel: 3, padding: 1, bias: false},
    {name: bn1, type: batchnorm2d},
    {name: r1, type: relu},
    {name: c2, type: conv2d, out_channels: 4, kernel: 3, padding: 1, bias: false},
    {name: bn2, type: batchnorm2d},
    {name: sum, type: add, inputs: [bn2, r1]},
    {name: r2, type: relu},
    {name: down, type: channel_pad, out_channels: 6, stride: 2},
    {name: c3, type: conv2d, out_channels: 6, kernel: 3, stride: 2, padding: 1, inputs: [r2]},
    {name: sum2, type: add, inputs: [c3, down]},
    {name: gap, type: global_avgpool},
    {name: f, type: flatten},
    {name: fc, type: linear, out_features: 3}])",
                        {3, 2, 6, 6}, opt);
}

// A producer read by an add and by a layer that runs backward later may share the add's
// gradient buffer (the others accumulate into it) only if every layer reading that buffer as
// its own gradient runs backward before the first accumulation: not here, where b reads it
// after c1 has accumulated (b comes before c1).
TEST_CASE("a shared gradient buffer is not changed before its last reader") {
  check_graph_gradients(R"([
    {name: c0, type: conv2d, out_channels: 2, kernel: 3, padding: 1},
    {name: b, type: conv2d, out_channels: 2, kernel: 3, padding: 1, inputs: [input]},
    {name: c1, type: conv2d, out_channels: 2, kernel: 3, padding: 1, inputs: [c0]},
    {name: s, type: add, inputs: [b, c0]},
    {name: t, type: add, inputs: [s, c1]},
    {name: f, type: flatten},
    {name: fc, type: linear, out_features: 2}])",
                        {2, 2, 4, 4});
}

TEST_CASE("a node read twice by one layer, and flatten of a shared producer") {
  check_graph_gradients(R"([
    {name: fc1, type: linear, out_features: 5},
    {name: twice, type: add, inputs: [fc1, fc1]},
    {name: fc2, type: linear, out_features: 2}])",
                        {3, 4});
  check_graph_gradients(R"([
    {name: c, type: conv2d, out_channels: 2, kernel: 3, padding: 1},
    {name: f1, type: flatten, inputs: [c]},
    {name: f2, type: flatten, inputs: [c]},
    {name: s, type: add, inputs: [f1, f2]},
    {name: fc, type: linear, out_features: 2}])",
                        {2, 1, 3, 3});
  // The input itself read by two layers, and a flatten straight on the input.
  check_graph_gradients(R"([
    {name: f, type: flatten},
    {name: a, type: linear, out_features: 3},
    {name: b, type: linear, out_features: 3, inputs: [input]},
    {name: s, type: add, inputs: [a, b]}])",
                        {2, 2, 2, 2});
}

TEST_CASE("softmax cross-entropy head through a model") {
  auto backend = cpu();
  YAML::Node spec = YAML::Load(R"({layers: [
    {name: c, type: conv2d, out_channels: 3, kernel: 3, padding: 1},
    {name: r, type: relu},
    {name: f, type: flatten},
    {name: fc, type: linear, out_features: 4}]})");
  auto model = build_model(*backend, spec, {{2, 4, 4}, 4, 5}, 11);
  Tensor x = random_tensor({5, 2, 4, 4}, 1);
  Tensor labels = Tensor::empty({5}, DType::i32);
  for (int i = 0; i < 5; ++i) labels.data<int32_t>()[i] = (i * 3) % 4;
  model->forward(x, labels);
  // The loss against a host computation from the logits.
  const Tensor& z = model->logits();
  double loss = 0;
  double correct = 0;
  for (int r = 0; r < 5; ++r) {
    const float* zr = z.data<float>() + r * 4;
    double m = *std::max_element(zr, zr + 4), s = 0;
    for (int j = 0; j < 4; ++j) s += std::exp(zr[j] - m);
    const int label = labels.data<int32_t>()[r];
    loss += std::log(s) + m - zr[label];
    correct += (std::max_element(zr, zr + 4) - zr) == label;
  }
  LossStats st = model->last_stats();
  CHECK(st.count == 5);
  CHECK(st.loss_sum == doctest::Approx(loss).epsilon(1e-5));
  CHECK(st.correct == correct);
  // Gradient of the loss sum (grad_scale 1) by finite differences.
  model->backward(1.0f);
  const std::vector<float> grads = to_vector(model->gradients());
  auto objective = [&]() {
    model->forward(x, labels);
    return model->last_stats().loss_sum;
  };
  compare_gradients("d(loss)/dparams", model->parameters(), grads, objective, 1e-3f);
  compare_gradients(
      "d(loss)/dparams scaled", model->parameters(),
      [&] {
        model->forward(x, labels);
        model->backward(0.5f);
        std::vector<float> g = to_vector(model->gradients());
        for (float& v : g) v *= 2.0f;
        return g;
      }(),
      objective, 1e-3f);
}
