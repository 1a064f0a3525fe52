// model.recompute: blocks (activation recomputation): training with it equals training without it
// bit for bit — loss, every parameter's gradient, BatchNorm's running statistics, with dropout —
// for the GPT, ResNet-20 and a custom list with `block:` markers; it plans fewer activation bytes;
// estimate_activation_bytes equals what materialize plans; and the spec's errors name the key.
#include <cstring>  // memcmp
#include <string>
#include <vector>

#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

struct Trained {
  std::vector<double> losses;
  std::vector<float> gradients, parameters, buffers;
  int64_t planned = 0;
};

// Three training steps of `spec` built for `input` (recompute none or blocks), with a plain SGD
// step in between so that each step computes with other weights and another dropout step.
Trained train(YAML::Node spec, const ModelInput& input, const Tensor& x, const Tensor& labels,
              const std::string& recompute) {
  spec["recompute"] = recompute;
  auto backend = cpu(2);
  auto model = build_model(*backend, spec, input, 7);
  model->set_dropout_seed(11);
  Trained out;
  out.planned = model->graph().activation_bytes();
  for (int step = 0; step < 3; ++step) {
    model->forward(x, labels);
    model->backward(1.0f / static_cast<float>(input.batch));
    out.losses.push_back(model->last_stats().loss_sum);
    backend->axpy(-0.05f, model->gradients(), model->parameters());
  }
  out.gradients = to_vector(model->gradients());
  out.parameters = to_vector(model->parameters());
  if (model->buffers().numel() > 0) out.buffers = to_vector(model->buffers());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_bit_for_bit(const YAML::Node& spec, const ModelInput& input, const Tensor& x,
                       const Tensor& labels) {
  const Trained none = train(YAML::Clone(spec), input, x, labels, "none");
  const Trained blocks = train(YAML::Clone(spec), input, x, labels, "blocks");
  CHECK(none.losses == blocks.losses);
  CHECK(same_bits(none.gradients, blocks.gradients));
  CHECK(same_bits(none.parameters, blocks.parameters));
  CHECK(same_bits(none.buffers, blocks.buffers));  // BatchNorm's running statistics
  CHECK(blocks.planned < none.planned);
  MESSAGE("planned activation bytes: " << none.planned << " without, " << blocks.planned
                                       << " with recomputation");
}

Tensor tokens(int64_t batch, int64_t t, int64_t vocab, uint64_t stream) {
  Tensor x = Tensor::empty({batch, t});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = static_cast<float>(
        static_cast<int64_t>(random_uniform(5, stream, i) * static_cast<float>(vocab)) % vocab);
  return x;
}

Tensor classes(const Shape& shape, int64_t count, uint64_t stream) {
  Tensor y = Tensor::empty(shape, DType::i32);
  for (int64_t i = 0; i < y.numel(); ++i)
    y.data<int32_t>()[i] =
        static_cast<int32_t>(static_cast<int64_t>(random_uniform(6, stream, i) * count) % count);
  return y;
}

const char* kCustom = R"(
layers:
  - {name: fc0, type: linear, out_features: 24}
  - {name: b1.fc, type: linear, out_features: 24, block: b1}
  - {name: b1.bn, type: batchnorm2d, block: b1}
  - {name: b1.relu, type: relu, block: b1}
  - {name: b1.drop, type: dropout, p: 0.25, block: b1}
  - {name: b1.add, type: add, inputs: [b1.drop, fc0], block: b1}
  - {name: b2.fc, type: linear, out_features: 24, block: b2}
  - {name: b2.gelu, type: gelu, block: b2}
  - {name: b2.drop, type: dropout, p: 0.25, block: b2}
  - {name: b2.add, type: add, inputs: [b2.drop, b1.add], block: b2}
  - {name: head, type: linear, out_features: 10}
)";

}  // namespace

TEST_CASE("recompute: blocks equals none bit for bit: the GPT with dropout") {
  const ModelInput input{{16}, 29, 3};
  const YAML::Node spec =
      YAML::Load("{name: gpt, n_layer: 3, n_head: 2, n_embd: 16, dropout: 0.2}");
  check_bit_for_bit(spec, input, tokens(3, 16, 29, 1), classes({3, 16}, 29, 2));
}

TEST_CASE("recompute: blocks equals none bit for bit: ResNet-20, BatchNorm's running statistics") {
  const ModelInput input{{3, 8, 8}, 10, 4};
  check_bit_for_bit(YAML::Load("{name: resnet20}"), input, random_tensor({4, 3, 8, 8}, 3),
                    classes({4}, 10, 4));
  // Projection shortcuts (a 1×1 convolution and its BatchNorm in the block).
  check_bit_for_bit(YAML::Load("{name: resnet20, shortcut: B}"), input,
                    random_tensor({4, 3, 8, 8}, 5), classes({4}, 10, 6));
}

TEST_CASE("recompute: blocks equals none bit for bit: a custom list with `block:` markers") {
  const ModelInput input{{12}, 10, 5};
  check_bit_for_bit(YAML::Load(kCustom), input, random_tensor({5, 12}, 7), classes({5}, 10, 8));
}

TEST_CASE("recompute: the estimate without allocating equals what materialize plans") {
  auto backend = cpu(1);
  struct Case {
    const char* spec;
    ModelInput input;
  };
  const Case cases[] = {
      {"{name: gpt, n_layer: 3, n_head: 2, n_embd: 16, dropout: 0.1}", {{16}, 29, 3}},
      {"{name: resnet20}", {{3, 8, 8}, 10, 4}},
      {"{name: resnet20}", {{3, 32, 32}, 10, 8}},
  };
  for (const Case& c : cases)
    for (const DType precision : {DType::f32, DType::bf16})
      for (const char* recompute : {"none", "blocks"}) {
        YAML::Node spec = YAML::Load(c.spec);
        spec["recompute"] = recompute;
        ModelInput input = c.input;
        input.precision = precision;
        CAPTURE(c.spec);
        CAPTURE(recompute);
        CAPTURE(dtype_name(precision));
        const bool blocks = std::string(recompute) == "blocks";
        const int64_t estimate = estimate_activation_bytes(spec, input, blocks);
        CHECK(estimate > 0);
        if (precision == DType::bf16) {
          // About half of f32's, casts aside; compared with materialize where bf16 runs.
          ModelInput f32 = input;
          f32.precision = DType::f32;
          CHECK(estimate < estimate_activation_bytes(spec, f32, blocks));
          if (!backend->bf16_unavailable().empty()) continue;
        }
        auto model = build_model(*backend, spec, input, 1);
        CHECK(estimate == model->graph().activation_bytes());
      }
  // The Graph's own estimate, before and after materialize, and without blocks.
  const ModelInput input{{3, 8, 8}, 10, 4};
  auto model = build_model(*backend, YAML::Load("{name: resnet20}"), input, 1);
  CHECK(model->graph().estimate_activation_bytes(false) == model->graph().activation_bytes());
  CHECK(model->graph().estimate_activation_bytes(true) < model->graph().activation_bytes());
  const YAML::Node mlp = YAML::Load("{name: mlp}");
  const ModelInput images{{1, 28, 28}, 10, 8};
  CHECK(estimate_activation_bytes(mlp, images, true) ==
        estimate_activation_bytes(mlp, images, false));
}

TEST_CASE("recompute: GPT-2 large's estimate is planned on shapes alone") {
  // 774M parameters: building them would take 3 GB; the estimate allocates no tensor.
  const ModelInput input{{1024}, 50257, 2};
  const YAML::Node spec = YAML::Load("{name: gpt2, size: large}");
  const int64_t none = estimate_activation_bytes(spec, input, false);
  const int64_t blocks = estimate_activation_bytes(spec, input, true);
  MESSAGE("gpt2 large, batch 2 × 1024: " << none / 1e6 << " MB of activations, " << blocks / 1e6
                                         << " MB with recomputation");
  CHECK(blocks < none / 3);
  // The logits alone, [2, 1024, 50257] f32, and their gradient are in either.
  CHECK(blocks > 2 * 1024 * 50257 * 4);
}

TEST_CASE("recompute: errors name model.recompute and model.layers[i].block") {
  auto problems_of = [](const std::string& yaml) {
    std::vector<std::string> problems;
    check_model_spec(YAML::Load(yaml), problems);
    return problems;
  };
  auto has = [](const std::vector<std::string>& problems, const std::string& start) {
    for (const auto& p : problems)
      if (p.rfind(start, 0) == 0) return true;
    for (const auto& p : problems) MESSAGE("problem: " << p);
    return false;
  };
  CHECK(problems_of("{name: gpt, recompute: blocks}").empty());
  CHECK(problems_of("{name: resnet20, recompute: none}").empty());
  CHECK(problems_of(kCustom).empty());
  CHECK(has(problems_of("{name: mlp, recompute: blocks}"),
            "model.recompute: blocks: model 'mlp' has no blocks to recompute"));
  CHECK(has(problems_of("{layers: [{name: a, type: relu}], recompute: blocks}"),
            "model.recompute: blocks: the `layers:` list has no blocks to recompute"));
  CHECK(has(problems_of("{name: gpt, recompute: sometimes}"), "model.recompute: "));
  CHECK(has(problems_of("{name: gpt, recompute: true}"), "model.recompute: "));
  CHECK(has(problems_of("{layers: [{name: a, type: relu, block: x}, {name: b, type: relu, block: "
                        "y}, {name: c, type: relu, block: x}]}"),
            "model.layers[2].block: block 'x' is not consecutive"));
  CHECK(
      has(problems_of("{layers: [{name: a, type: relu, block: ''}]}"), "model.layers[0].block: "));
  // The resolved spec says it, default included; the zoo marks its blocks.
  std::vector<std::string> problems;
  CHECK(check_model_spec(YAML::Load("{name: gpt}"), problems)["recompute"].as<std::string>() ==
        "none");
  const YAML::Node layers =
      expand_model_spec(YAML::Load("{name: gpt, n_layer: 2}"), {{8}, 20, 1})["layers"];
  std::vector<std::string> blocks;
  for (const YAML::Node& e : layers)
    blocks.push_back(e["block"] ? e["block"].as<std::string>() : "");
  CHECK(blocks.front() == "");  // transformer.wte
  CHECK(blocks.back() == "");   // lm_head
  CHECK(std::count(blocks.begin(), blocks.end(), "transformer.h.1") == 10);
}
