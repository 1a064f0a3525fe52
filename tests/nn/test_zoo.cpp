// Zoo parameter counts against the reference implementations, and real builds of the small
// models (forward + backward at a tiny batch).
#include "helpers.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {
YAML::Node zoo(const std::string& yaml) {
  return YAML::Load(yaml);
}
const ModelInput kMnist{{1, 28, 28}, 10, 1};
const ModelInput kCifar{{3, 32, 32}, 10, 1};
const ModelInput kImagenet{{3, 224, 224}, 1000, 1};
}  // namespace

TEST_CASE("zoo parameter counts match the references") {
  CHECK(count_parameters(zoo("{name: mlp}"), kMnist) == 648010);
  CHECK(count_parameters(zoo("{name: mlp, hidden: [100]}"), kMnist) == 784 * 100 + 100 + 1010);
  CHECK(count_parameters(zoo("{name: alexnet}"), kImagenet) == 61100840);
  CHECK(count_parameters(zoo("{name: alexnet, lrn: true}"), kImagenet) == 61100840);
  CHECK(count_parameters(zoo("{name: vgg16}"), kImagenet) == 138357544);
  CHECK(count_parameters(zoo("{name: vgg16, batch_norm: true}"), kImagenet) == 138365992);
  CHECK(count_parameters(zoo("{name: resnet18}"), kImagenet) == 11689512);
  CHECK(count_parameters(zoo("{name: resnet50}"), kImagenet) == 25557032);
  // He et al.'s CIFAR ResNet-20: option A has no shortcut parameters; B adds 1×1 projections.
  CHECK(count_parameters(zoo("{name: resnet20}"), kCifar) == 269722);
  CHECK(count_parameters(zoo("{name: resnet20, shortcut: B}"), kCifar) == 272474);
  // LeNet-5: 156 + 2,416 + 48,120 + 10,164 + 850.
  CHECK(count_parameters(zoo("{name: lenet}"), kMnist) == 61706);
  CHECK(count_parameters(zoo("{name: lenet}"), ModelInput{{1, 32, 32}, 10, 1}) == 61706);
  // cifar10_quick: 2,432 + 25,632 + 51,264 + 65,600 + 650.
  CHECK(count_parameters(zoo("{name: cifar_cnn}"), kCifar) == 145578);
  // Small inputs: ResNet-18 with the CIFAR stem (3×3 conv1: 1,728 instead of 9,408 weights).
  CHECK(count_parameters(zoo("{name: resnet18}"), ModelInput{{3, 32, 32}, 10, 1}) ==
        11689512 - 9408 + 1728 - 513 * 990);
}

TEST_CASE("zoo summary ends with the parameter count") {
  const std::string s = describe_model(zoo("{name: lenet}"), kMnist);
  CHECK(s.size() > 20);
  CHECK(s.substr(s.rfind("parameters:")) == "parameters: 61706\n");
  CHECK(s.find("c1") != std::string::npos);
  CHECK(s.find("conv2d") != std::string::npos);
  CHECK(s.find("[6, 28, 28]") != std::string::npos);
}

TEST_CASE("forward FLOPs count multiply-adds twice") {
  auto backend = cpu();
  auto m = build_model(*backend, zoo("{name: mlp, hidden: [20]}"), {{1, 4, 4}, 3, 2}, 1);
  // flatten 0, fc1 2·16·20 + 20, relu 20, fc2 2·20·3 + 3.
  CHECK(m->forward_flops() == 2 * 16 * 20 + 20 + 20 + 2 * 20 * 3 + 3);
}

TEST_CASE("small zoo models build, train a step and report ranges") {
  auto backend = cpu();
  struct Case {
    const char* spec;
    ModelInput input;
  };
  const Case cases[] = {{"{name: mlp}", {{1, 28, 28}, 10, 2}},
                        {"{name: lenet}", {{1, 28, 28}, 10, 2}},
                        {"{name: cifar_cnn, lrn: true}", {{3, 32, 32}, 10, 2}},
                        {"{name: resnet20}", {{3, 32, 32}, 10, 2}},
                        {"{name: resnet18}", {{3, 32, 32}, 10, 2}}};
  for (const Case& c : cases) {
    CAPTURE(c.spec);
    auto m = build_model(*backend, zoo(c.spec), c.input, 5);
    CHECK(m->num_parameters() == count_parameters(zoo(c.spec), c.input));
    // Ranges tile the flat buffer in forward order.
    int64_t next = 0;
    for (const LayerRange& r : m->layer_ranges()) {
      CHECK(r.offset == next);
      next += r.count;
    }
    CHECK(next == m->num_parameters());
    Shape shape({2});
    std::vector<int64_t> dims{2};
    for (int64_t d : c.input.sample_shape.dims()) dims.push_back(d);
    Tensor x = random_tensor(Shape(dims), 1);
    Tensor labels = Tensor::empty({2}, DType::i32);
    labels.data<int32_t>()[0] = 1;
    labels.data<int32_t>()[1] = 7;
    m->forward(x, labels);
    LossStats st = m->last_stats();
    CHECK(std::isfinite(st.loss_sum));
    CHECK(st.loss_sum > 0);
    m->backward(0.5f);
    double norm = 0;
    for (float g : to_vector(m->gradients())) norm += static_cast<double>(g) * g;
    CHECK(std::isfinite(norm));
    CHECK(norm > 0);
  }
}

TEST_CASE("torchvision-style initialisation statistics") {
  auto backend = cpu();
  auto m = build_model(*backend, zoo("{name: resnet20}"), kCifar, 3);
  const std::vector<float> p = to_vector(m->parameters());
  for (const LayerRange& r : m->layer_ranges()) {
    if (r.name == "layer3.2.conv2") {
      // kaiming_normal fan_in: std √(2 / (64·9)).
      double sum = 0, sq = 0;
      for (int64_t i = r.offset; i < r.offset + r.count; ++i) sum += p[i], sq += p[i] * p[i];
      const double n = static_cast<double>(r.count), mean = sum / n;
      CHECK(std::fabs(mean) < 0.005);
      CHECK(std::sqrt(sq / n - mean * mean) == doctest::Approx(std::sqrt(2.0 / 576)).epsilon(0.03));
    }
    if (r.name == "layer1.0.bn1") {
      CHECK(p[r.offset] == 1.0f);                // weight
      CHECK(p[r.offset + r.count - 1] == 0.0f);  // bias
    }
  }
  // PyTorch default for Linear: U(±1/√fan_in).
  auto mlp = build_model(*backend, zoo("{name: mlp}"), kMnist, 3);
  const LayerRange fc1 = mlp->layer_ranges()[0];
  const std::vector<float> w = to_vector(mlp->parameters());
  float lo = 1, hi = -1;
  for (int64_t i = fc1.offset; i < fc1.offset + fc1.count; ++i)
    lo = std::min(lo, w[i]), hi = std::max(hi, w[i]);
  CHECK(hi <= 1.0f / 28.0f);
  CHECK(lo >= -1.0f / 28.0f);
  CHECK(hi > 0.99f / 28.0f);
}
