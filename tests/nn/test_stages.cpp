// Pipeline stages as slices of the layer graph: where a model can be cut, what a bad cut says,
// and that the stages' initial buffers laid end to end are the whole model's, bit for bit.
#include <cstring>  // memcmp

#include "core/error.h"
#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// The stages' parameters, each built from its own layer list and initialised from its first
// parameter stream, concatenated; checks that each stage reads what the previous one gives.
std::vector<float> stage_parameters(Backend& backend, const std::vector<StageSlice>& stages,
                                    int64_t batch) {
  std::vector<float> all;
  Shape previous_output;
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageSlice& stage = stages[s];
    std::vector<int64_t> dims{batch};
    for (int64_t d : stage.sample_shape.dims()) dims.push_back(d);
    Graph graph(make_nodes(stage.layers), Shape(dims));
    if (s > 0) CHECK(graph.input_shape() == previous_output);
    previous_output = graph.output_shape();
    graph.materialize(backend, 42, false, stage.first_param_stream);
    CHECK(graph.num_parameters() == stage.parameters);
    const float* p = graph.parameters().data<float>();
    all.insert(all.end(), p, p + graph.num_parameters());
  }
  return all;
}

std::vector<float> whole_parameters(Backend& backend, const YAML::Node& model,
                                    const ModelInput& input) {
  auto m = build_model(backend, model, input, 42);
  const float* p = m->parameters().data<float>();
  return {p, p + m->num_parameters()};
}

}  // namespace

TEST_CASE("every zoo model's stages start exactly as the whole model") {
  auto backend = cpu();
  struct Case {
    const char* spec;
    ModelInput input;
  };
  for (const Case& c :
       {Case{"{name: mlp, hidden: [32, 16]}", {{1, 8, 8}, 10, 2}},
        Case{"{name: lenet}", {{1, 28, 28}, 10, 2}}, Case{"{name: vgg16}", {{3, 32, 32}, 10, 2}},
        Case{"{name: resnet20}", {{3, 32, 32}, 10, 2}}}) {
    CAPTURE(c.spec);
    const YAML::Node model = YAML::Load(c.spec);
    const std::vector<float> whole = whole_parameters(*backend, model, c.input);
    const std::vector<std::string> points = model_cut_points(model, c.input);
    REQUIRE(points.size() >= 2);
    // Up to 6 single cuts spread over the model, and the first, middle and last together.
    std::vector<std::vector<std::string>> cuts;
    const size_t step = std::max<size_t>(1, points.size() / 6);
    for (size_t i = 0; i < points.size(); i += step) cuts.push_back({points[i]});
    cuts.push_back({points.front(), points[points.size() / 2], points.back()});
    for (const auto& starts : cuts) {
      CAPTURE(starts.front());
      const auto stages = split_model(model, c.input, starts);
      REQUIRE(stages.size() == starts.size() + 1);
      const std::vector<float> sliced = stage_parameters(*backend, stages, c.input.batch);
      REQUIRE(sliced.size() == whole.size());
      CHECK(std::memcmp(sliced.data(), whole.data(), whole.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("bad cuts are input errors naming the key, the layer and what would cross") {
  const ModelInput cifar{{3, 32, 32}, 10, 2};
  const YAML::Node resnet = YAML::Load("{name: resnet20}");
  const std::vector<std::string> points = model_cut_points(resnet, cifar);
  // Inside a residual block: the block's input still travels to the add.
  const YAML::Node layers = expand_model_spec(resnet, cifar)["layers"];
  std::string inside;
  for (const YAML::Node& e : layers) {
    const std::string name = e["name"].as<std::string>();
    if (name != layers[0]["name"].as<std::string>() &&
        std::find(points.begin(), points.end(), name) == points.end()) {
      try {
        split_model(resnet, cifar, {name});
      } catch (const InputError& e) {
        if (std::string(e.what()).find("tensors would cross") != std::string::npos) {
          inside = e.what();
          break;
        }
      }
    }
  }
  CHECK(inside.find("algorithm.stages[0]: cannot cut before '") != std::string::npos);
  CHECK(inside.find("2 tensors would cross (") != std::string::npos);

  const ModelInput mnist{{1, 8, 8}, 10, 2};
  const YAML::Node mlp = YAML::Load(
      "{layers: [{name: flat, type: flatten}, "
      "{name: fc1, type: linear, out_features: 16}, "
      "{name: relu1, type: relu}, "
      "{name: fc2, type: linear, out_features: 10}]}");
  CHECK(model_cut_points(mlp, mnist) == std::vector<std::string>{"fc1", "fc2"});
  auto message = [&](const std::vector<std::string>& starts) {
    try {
      split_model(mlp, mnist, starts);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message({"relu1"}) ==
        "algorithm.stages[0]: cannot cut before 'relu1': it is a ReLU fused into 'fc1' (cut "
        "after it)");
  CHECK(message({"fc3"}).find("algorithm.stages[0]: 'fc3' is not a layer of the model (its cut "
                              "points: fc1, fc2)") != std::string::npos);
  CHECK(message({"flat"}).find("stage 1 would be empty") != std::string::npos);
  CHECK(message({"fc2", "fc1"}).find("algorithm.stages[1]: stage 2 would be empty") !=
        std::string::npos);
  CHECK(message({"fc2", "fc2"}).find("stage 2 would be empty") != std::string::npos);
  // A valid split names its stages' layers and shapes.
  const auto stages = split_model(mlp, mnist, {"fc2"});
  CHECK(stages[0].first_layer == "flat");
  CHECK(stages[0].last_layer == "relu1");
  CHECK(stages[1].first_layer == "fc2");
  CHECK(stages[1].sample_shape == Shape{16});
  CHECK(stages[1].first_parameter == 64 * 16 + 16);
}

TEST_CASE("graphs sharing one stage's weights keep each minibatch in flight apart") {
  // Two minibatches in flight (1F1B): forward 1, forward 2, backward 1, backward 2 on two graphs
  // that share parameters, gradients and BatchNorm statistics give what one graph gives running
  // them one after the other — activations, batch statistics and dropout masks included.
  auto backend = cpu();
  const ModelInput input{{3, 8, 8}, 10, 4};
  const YAML::Node model = YAML::Load(
      "{layers: [{name: c1, type: conv2d, out_channels: 4, kernel: 3, padding: 1}, "
      "{name: bn1, type: batchnorm2d}, {name: r1, type: relu}, {name: flat, type: flatten}, "
      "{name: drop, type: dropout, p: 0.3}, {name: fc, type: linear, out_features: 10}]}");
  const StageSlice stage = split_model(model, input, {})[0];
  auto graph = [&] {
    auto g = std::make_unique<Graph>(make_nodes(stage.layers), Shape{4, 3, 8, 8});
    g->materialize(*backend, 9);
    return g;
  };
  auto one = graph(), a = graph(), b = graph();
  b->set_parameters(a->parameters());
  b->set_gradients(a->gradients());
  b->set_buffers(a->buffers());
  Tensor x1 = Tensor::empty({4, 3, 8, 8}), x2 = Tensor::empty({4, 3, 8, 8});
  fill_random(x1, 1);
  fill_random(x2, 2);
  Tensor dy1 = Tensor::empty({4, 10}), dy2 = Tensor::empty({4, 10});
  fill_random(dy1, 3);
  fill_random(dy2, 4);
  auto run_backward = [&](Graph& g, const Tensor& dy) {
    backend->copy(g.output_gradient(), dy);
    g.backward();
    const float* p = g.gradients().data<float>();
    return std::vector<float>(p, p + g.num_parameters());
  };
  // One graph, one minibatch after the other.
  one->set_step(0);
  one->forward(x1);
  const std::vector<float> g1 = run_backward(*one, dy1);
  one->set_step(1);
  one->forward(x2);
  const std::vector<float> g2 = run_backward(*one, dy2);
  // Two graphs, both minibatches in flight.
  a->set_step(0);
  a->forward(x1);
  b->set_step(1);
  b->forward(x2);
  CHECK(run_backward(*a, dy1) == g1);
  CHECK(run_backward(*b, dy2) == g2);
  // One graph with both in flight would backpropagate minibatch 1 through minibatch 2's state.
  auto mixed = graph();
  mixed->set_step(0);
  mixed->forward(x1);
  mixed->set_step(1);
  mixed->forward(x2);
  CHECK(run_backward(*mixed, dy1) != g1);
  const float* s1 = one->buffers().data<float>();
  const float* s2 = a->buffers().data<float>();
  CHECK(std::vector<float>(s1, s1 + one->num_buffer_elements()) ==
        std::vector<float>(s2, s2 + a->num_buffer_elements()));
}
