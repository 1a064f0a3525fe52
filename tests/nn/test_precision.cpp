// Mixed precision (Graph::use_precision, nn/graph_precision.cpp): which activations are bf16,
// where the casts go, and that every layer type, small graphs of them and whole ResNet-20 and
// GPT steps in bf16 compute what they compute in f32 within bf16's rounding, with the
// parameters and their gradients still f32 and the activation memory about halved.
#include <cmath>

#include "backend/cpu/bf16.h"  // round_to_bf16: inputs and weights both graphs read exactly
#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

bool bf16_here() {
  const std::string why = test::cpu()->bf16_unavailable();
  if (!why.empty()) MESSAGE("skipped: " << why);
  return why.empty();
}

void round_all(const Tensor& t) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dtrain::cpu::round_to_bf16(p[i]);
}

struct Run {
  std::vector<float> output, input_grad, param_grad, buffers;
  int64_t planned = 0;
  std::vector<DType> dtypes;  // of the layers asked about
};

// `perturb`: each weight scaled by a random factor in 1 ± perturb/2, for the model's own
// sensitivity to a change of bf16's size.
Run run_graph(std::vector<GraphNode> graph_nodes, const Shape& input_shape, DType precision,
              const std::vector<std::string>& ask = {}, bool blocked = true, float perturb = 0) {
  auto backend = test::cpu();
  Graph g(std::move(graph_nodes), input_shape);
  g.use_blocked_layouts(blocked);
  g.use_precision(precision);
  g.materialize(*backend, 7, /*input_gradient=*/true);
  Run r;
  for (const auto& name : ask) r.dtypes.push_back(g.output_dtype(name));
  // Weights and input that bf16 holds exactly, in both runs: what differs is only where bf16
  // stores activations and their gradients.
  round_all(g.parameters());
  float* w = g.parameters().data<float>();
  for (int64_t i = 0; perturb > 0 && i < g.parameters().numel(); ++i)
    w[i] *= 1.0f + perturb * (random_uniform(5, 5, i) - 0.5f);
  Tensor x = random_tensor(input_shape, 1);
  round_all(x);
  for (int step = 0; step < 2; ++step) {  // the second step on the memory the first left
    r.output = to_vector(g.forward(x));
    backend->copy(g.output_gradient(), random_tensor(g.output_shape(), 2 + step));
    g.backward();
  }
  CHECK(g.parameters().dtype() == DType::f32);
  CHECK(g.gradients().dtype() == DType::f32);
  CHECK(g.output_gradient().dtype() == DType::f32);
  r.input_grad = to_vector(g.input_gradient());
  r.param_grad = to_vector(g.gradients());
  r.buffers = to_vector(g.buffers());
  r.planned = g.activation_bytes();
  return r;
}

// ‖a − b‖₂ ≤ rtol·‖b‖₂. bf16 keeps 8 significant bits, a relative error of up to 2^-8 per stored
// value, and the errors of a few layers add up; a norm rather than each element, because a value
// rounded across a max pool's tie or a ReLU's zero sends its gradient elsewhere, and batch norm's
// backward subtracts means from a gradient that arrived in bf16.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}
void check_close(const std::vector<float>& a, const std::vector<float>& b, const char* what,
                 double rtol) {
  const double relative = relative_error(a, b);
  CHECK_MESSAGE(relative <= rtol, what << ": relative error " << relative << " > " << rtol);
}

// bf16 against f32 on the same weights and data, and the dtype of the named layers.
void check_bf16(const std::function<std::vector<GraphNode>()>& make, const Shape& input,
                double rtol, const std::vector<std::pair<std::string, DType>>& expect = {}) {
  std::vector<std::string> ask;
  for (const auto& e : expect) ask.push_back(e.first);
  const Run f32 = run_graph(make(), input, DType::f32);
  const Run bf16 = run_graph(make(), input, DType::bf16, ask);
  for (size_t i = 0; i < expect.size(); ++i) {
    CAPTURE(expect[i].first);
    CHECK(dtype_name(bf16.dtypes[i]) == dtype_name(expect[i].second));
  }
  check_close(bf16.output, f32.output, "output", rtol);
  check_close(bf16.input_grad, f32.input_grad, "d/dinput", rtol);
  check_close(bf16.param_grad, f32.param_grad, "d/dparams", rtol);
  check_close(bf16.buffers, f32.buffers, "batch-norm statistics", rtol);
}

constexpr DType f32 = DType::f32, bf16 = DType::bf16;

}  // namespace

TEST_CASE("bf16: a linear chain casts once in and once out, and keeps its ReLUs fused") {
  if (!bf16_here()) return;
  // Two linear layers with a fused ReLU: per value two or three roundings to 8 bits.
  check_bf16(
      [] {
        return nodes(R"([
          {name: fc1, type: linear, out_features: 40},
          {name: r1, type: relu},
          {name: fc2, type: linear, out_features: 7}])");
      },
      {5, 33}, 2e-2,
      {{"input.bf16", bf16}, {"fc1", bf16}, {"r1", bf16}, {"fc2", bf16}, {"fc2.f32", f32}});
}

TEST_CASE("bf16: every CNN layer type against f32, blocked, with its casts") {
  if (!bf16_here()) return;
  // Convolutions, batch norm with its fused ReLU, both poolings, LRN (f32: a cast each way
  // around it), dropout, a flatten that reorders, linear.
  check_bf16(
      [] {
        return nodes(R"([
          {name: c1, type: conv2d, out_channels: 32, kernel: 3, padding: 1},
          {name: bn1, type: batchnorm2d},
          {name: r1, type: relu},
          {name: p1, type: maxpool2d, kernel: 3, stride: 2, padding: 1},
          {name: c2, type: conv2d, out_channels: 32, kernel: 3, padding: 1},
          {name: r2, type: relu},
          {name: p2, type: avgpool2d, kernel: 3, stride: 2, ceil_mode: true,
           count_include_pad: false},
          {name: n, type: lrn, size: 3},
          {name: d, type: dropout, p: 0.5},
          {name: f, type: flatten},
          {name: fc, type: linear, out_features: 5}])");
      },
      {3, 16, 12, 12}, 5e-2,  // measured 3.1 % on d/dinput: max pooling's ties
      {{"c1", bf16}, {"bn1", bf16}, {"p1", bf16}, {"p2", bf16}, {"p2.f32", f32}, {"n", f32},
       {"d", f32}, {"f", f32}, {"f.bf16", bf16}, {"fc", bf16}});
  // A residual stage: the option-A shortcut (channel padding), the sum and its ReLU, global
  // average pooling, gelu; the block's input is read by two layers, so its bf16 gradient is a sum.
  check_bf16(
      [] {
        return nodes(R"([
          {name: c0, type: conv2d, out_channels: 16, kernel: 3, padding: 1, bias: false},
          {name: b0, type: batchnorm2d},
          {name: r0, type: relu},
          {name: c1, type: conv2d, out_channels: 32, kernel: 3, stride: 2, padding: 1, bias: false},
          {name: b1, type: batchnorm2d},
          {name: g1, type: gelu},
          {name: c2, type: conv2d, out_channels: 32, kernel: 3, padding: 1, bias: false},
          {name: b2, type: batchnorm2d},
          {name: sc, type: channel_pad, out_channels: 32, stride: 2, inputs: [r0]},
          {name: sum, type: add, inputs: [b2, sc]},
          {name: r2, type: relu},
          {name: gap, type: global_avgpool},
          {name: f, type: flatten},
          {name: fc, type: linear, out_features: 3}])");
      },
      {2, 3, 8, 8}, 3e-2,
      {{"r0", bf16}, {"g1", bf16}, {"sc", bf16}, {"sum", bf16}, {"gap", bf16}, {"fc", bf16}});
}

TEST_CASE("bf16: plain layouts compute what blocked ones do") {
  if (!bf16_here()) return;
  auto make = [] {
    return nodes(R"([
      {name: c1, type: conv2d, out_channels: 16, kernel: 3, padding: 1},
      {name: bn1, type: batchnorm2d},
      {name: r1, type: relu},
      {name: p1, type: maxpool2d, kernel: 2},
      {name: f, type: flatten},
      {name: fc, type: linear, out_features: 4}])");
  };
  const Run blocked = run_graph(make(), {2, 3, 8, 8}, bf16, {}, true);
  const Run plain = run_graph(make(), {2, 3, 8, 8}, bf16, {}, false);
  // Both round the same values to bf16, but sum in other orders: a rounding step apart at most.
  check_close(plain.output, blocked.output, "output", 1e-2);
  check_close(plain.param_grad, blocked.param_grad, "d/dparams", 1e-2);
}

TEST_CASE("bf16: a transformer keeps its residual stream and layer norms in f32") {
  if (!bf16_here()) return;
  const ModelInput input{{16}, 29, 3};
  auto make = [&] {
    return make_nodes(expand_model_spec(YAML::Load("{name: gpt, n_layer: 2, n_head: 2, n_embd: 32, "
                                                   "block_size: 16}"),
                                        input)["layers"]);
  };
  auto backend = test::cpu();
  Graph g(make(), {3, 16});
  g.use_precision(bf16);
  g.materialize(*backend, 3);
  CHECK(g.output_dtype("transformer.wte") == f32);
  CHECK(g.output_dtype("transformer.h.0.ln_1") == f32);
  CHECK(g.output_dtype("transformer.h.0.ln_1.bf16") == bf16);
  CHECK(g.output_dtype("transformer.h.0.attn.c_attn") == bf16);
  CHECK(g.output_dtype("transformer.h.0.attn.attention") == bf16);
  CHECK(g.output_dtype("transformer.h.0.attn.c_proj") == bf16);
  CHECK(g.output_dtype("transformer.h.0.attn.c_proj.f32") == f32);
  CHECK(g.output_dtype("transformer.h.0.mlp.gelu") == bf16);
  CHECK(g.output_dtype("lm_head") == bf16);
  CHECK(g.output_name() == "lm_head");
}

TEST_CASE("bf16: whole ResNet-20 and GPT training steps against f32, activations halved") {
  if (!bf16_here()) return;
  SUBCASE("resnet20") {
    const ModelInput input{{3, 32, 32}, 10, 4};
    auto make = [&] {
      return make_nodes(expand_model_spec(YAML::Load("{name: resnet20}"), input)["layers"]);
    };
    const Shape shape{4, 3, 32, 32};
    const Run f32_run = run_graph(make(), shape, f32);
    const Run bf16_run = run_graph(make(), shape, bf16);
    // 19 convolutions with batch norm and ReLU at batch 4: a change of bf16's size anywhere
    // moves ReLU masks and batch statistics, and the gradients of the first layers follow.
    // f32 with its weights moved by ±2^-9 changes them by about as much (measured 15-20 %);
    // bf16 must stay within twice that.
    const Run moved = run_graph(make(), shape, f32, {}, true, 2.0f / 256);
    const double sensitivity = relative_error(moved.param_grad, f32_run.param_grad);
    const double error = relative_error(bf16_run.param_grad, f32_run.param_grad);
    MESSAGE("ResNet-20 gradients: bf16 " << error << " from f32; f32 with moved weights "
                                         << sensitivity);
    CHECK(error <= 2 * sensitivity);
    check_close(bf16_run.output, f32_run.output, "output", 1e-2);
    check_close(bf16_run.param_grad, f32_run.param_grad, "d/dparams", 0.5);
    MESSAGE("ResNet-20 activations at batch 4: f32 " << f32_run.planned << " bytes, bf16 "
                                                     << bf16_run.planned);
    CHECK(bf16_run.planned < 0.6 * f32_run.planned);
  }
  SUBCASE("gpt") {
    const ModelInput input{{32}, 65, 4};
    auto gpt = [&] {
      return make_nodes(expand_model_spec(YAML::Load("{name: gpt, n_layer: 2, n_head: 4, "
                                                     "n_embd: 64, block_size: 32}"),
                                          input)["layers"]);
    };
    // Token ids in [0, 65) as the input: f32 holding integers.
    auto run = [&](DType precision) {
      auto backend = test::cpu();
      Graph g(gpt(), {4, 32});
      g.use_precision(precision);
      g.materialize(*backend, 11);
      Tensor ids = Tensor::empty({4, 32});
      for (int64_t i = 0; i < ids.numel(); ++i)
        ids.data<float>()[i] = static_cast<float>((i * 7919) % 65);
      Run r;
      r.output = to_vector(g.forward(ids));
      backend->copy(g.output_gradient(), random_tensor(g.output_shape(), 5, -0.01f, 0.01f));
      g.backward();
      r.param_grad = to_vector(g.gradients());
      r.planned = g.activation_bytes();
      return r;
    };
    const Run a = run(f32), b = run(bf16);
    check_close(b.output, a.output, "logits", 3e-2);
    check_close(b.param_grad, a.param_grad, "d/dparams", 5e-2);
    MESSAGE("GPT activations at batch 4: f32 " << a.planned << " bytes, bf16 " << b.planned);
    CHECK(b.planned < 0.8 * a.planned);  // the residual stream and layer norms stay f32
  }
}

TEST_CASE("bf16: pipeline stages exchange the dtype the model has where it is cut") {
  // A CNN cut after its bf16 trunk sends bf16; a GPT cut between blocks sends its f32 residual
  // stream (the add after each block promotes to f32, as PyTorch's autocast does).
  const YAML::Node cnn = YAML::Load(R"({layers: [
      {name: c1, type: conv2d, out_channels: 16, kernel: 3, padding: 1},
      {name: r1, type: relu},
      {name: f, type: flatten},
      {name: fc, type: linear, out_features: 4}]})");
  ModelInput input{{3, 8, 8}, 4, 2, bf16};
  std::vector<StageSlice> stages = split_model(cnn, input, {"fc"});
  CHECK(stages[0].input_dtype == f32);
  CHECK(stages[0].output_dtype == bf16);
  CHECK(stages[1].input_dtype == bf16);
  CHECK(stages[1].output_dtype == f32);  // the loss reads f32
  input.precision = f32;
  stages = split_model(cnn, input, {"fc"});
  CHECK(stages[1].input_dtype == f32);

  const YAML::Node gpt = YAML::Load("{name: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 16}");
  const ModelInput tokens{{16}, 29, 2, bf16};
  stages = split_model(gpt, tokens, {"transformer.h.1.ln_1"});
  CHECK(stages[0].output_dtype == f32);
  CHECK(stages[1].input_dtype == f32);
}
