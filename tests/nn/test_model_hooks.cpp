// The hooks schedulers use on a model: set_parameters (forward and backward on another flat
// buffer of weights, without a copy), the forward hook before a named layer, and backward's
// on_ready report of the gradients that are final.
#include <algorithm>  // fill
#include <cstring>    // memcpy, memcmp
#include <limits>     // quiet_NaN

#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

const char* kNet =
    "{layers: [{name: fc1, type: linear, out_features: 8}, {name: relu, type: relu}, "
    "{name: fc2, type: linear, out_features: 3}]}";

struct Fixture {
  std::unique_ptr<Backend> backend = cpu();
  std::unique_ptr<Model> model;
  Tensor images = Tensor::empty({4, 1, 2, 3});
  Tensor labels = Tensor::empty({4}, DType::i32);

  Fixture() {
    std::vector<std::string> problems;
    model =
        build_model(*backend, check_model_spec(YAML::Load(kNet), problems), {{1, 2, 3}, 3, 4}, 7);
    fill_random(images, 1);
    for (int i = 0; i < 4; ++i) labels.data<int32_t>()[i] = i % 3;
  }
  std::vector<float> logits() {
    model->forward(images, labels);
    const Tensor& y = model->logits();
    return {y.data<float>(), y.data<float>() + y.numel()};
  }
};

}  // namespace

TEST_CASE("set_parameters: the model computes with the other buffer, the original is untouched") {
  Fixture f;
  const std::vector<float> before = f.logits();
  const Tensor original = f.model->parameters();
  Tensor other = Tensor::empty(original.shape());
  std::memcpy(other.raw(), original.raw(), original.bytes());
  f.model->set_parameters(other);
  CHECK(f.logits() == before);  // same values, other memory
  for (int64_t i = 0; i < other.numel(); ++i) other.data<float>()[i] *= 0.5f;
  const std::vector<float> halved = f.logits();
  CHECK(halved != before);
  CHECK(f.model->parameters().raw() == other.raw());

  // Backward reads the weights it was given: the gradient equals that of a model whose own
  // buffer holds them.
  f.model->backward(0.25f);
  const std::vector<float> g(f.model->gradients().data<float>(),
                             f.model->gradients().data<float>() + other.numel());
  Fixture g_ref;
  std::memcpy(g_ref.model->parameters().raw(), other.raw(), other.bytes());
  CHECK(g_ref.logits() == halved);
  g_ref.model->backward(0.25f);
  CHECK(std::memcmp(g.data(), g_ref.model->gradients().raw(), other.bytes()) == 0);

  f.model->set_parameters(original);
  CHECK(f.logits() == before);
}

TEST_CASE("the forward hook runs before its layer in training forwards only") {
  Fixture f;
  const std::vector<float> before = f.logits();
  int calls = 0;
  const LayerRange fc2 = f.model->layer_ranges()[1];
  REQUIRE(fc2.name == "fc2");
  // The hook zeroes fc2's weights and bias: this very forward's logits are then zero, while
  // fc1 (before the hook) ran on its weights as before.
  f.model->set_forward_hook("fc2", [&] {
    ++calls;
    std::memset(f.model->parameters().data<float>() + fc2.offset, 0, fc2.count * sizeof(float));
  });
  const std::vector<float> hooked = f.logits();
  CHECK(calls == 1);
  for (float v : hooked) CHECK(v == 0.0f);
  f.model->set_training(false);
  f.logits();
  CHECK(calls == 1);  // evaluation runs no hook
  f.model->set_training(true);
  f.model->set_forward_hook("fc2", {});
  f.logits();
  CHECK(calls == 1);
  CHECK(before.size() == hooked.size());
  CHECK_THROWS_AS(f.model->set_forward_hook("nope", [] {}), InputError);
}

TEST_CASE("each layer has a hook of its own, run in forward order") {
  Fixture f;
  std::vector<std::string> order;
  f.model->set_forward_hook("fc1", [&] { order.push_back("fc1"); });
  f.model->set_forward_hook("fc2", [&] { order.push_back("fc2"); });
  f.logits();
  CHECK(order == std::vector<std::string>{"fc1", "fc2"});
  // Setting one replaces that layer's only; an empty one removes it.
  f.model->set_forward_hook("fc1", [&] { order.push_back("fc1 again"); });
  f.model->set_forward_hook("fc2", {});
  order.clear();
  f.logits();
  CHECK(order == std::vector<std::string>{"fc1 again"});
}

TEST_CASE("backward reports a layer's gradients final right after its backward, last layer first") {
  // What gradient segments rely on (sched/gradient_segments.h): on_ready(offset) comes as soon
  // as gradients[offset, P) hold their final values, before any layer in front of the offset has
  // run its backward. Seen without timing: a gradient buffer filled with NaN keeps it in front of
  // the reported offset.
  Fixture f;
  f.logits();
  f.model->backward(0.25f);
  const Tensor& grads = f.model->gradients();
  const int64_t n = grads.numel();
  const std::vector<float> final(grads.data<float>(), grads.data<float>() + n);
  float* g = grads.data<float>();
  std::fill(g, g + n, std::numeric_limits<float>::quiet_NaN());
  f.logits();  // the same batch and weights: the same gradients
  std::vector<int64_t> offsets;
  f.model->backward(0.25f, [&](int64_t offset) {
    offsets.push_back(offset);
    CHECK(std::memcmp(g + offset, final.data() + offset, (n - offset) * sizeof(float)) == 0);
    for (int64_t i = 0; i < offset; ++i) CHECK(std::isnan(g[i]));
  });
  const std::vector<LayerRange>& layers = f.model->layer_ranges();
  REQUIRE(layers.size() == 2);
  CHECK(offsets == std::vector<int64_t>{layers[1].offset, layers[0].offset});
}
