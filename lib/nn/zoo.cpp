// The model zoo's classic networks, each written as the `layers:` list a user could have given
// (the ResNets are in zoo_resnet.cpp, the table in zoo_table.cpp). Each has its options struct
// and schema; the options come checked and completed by the spec reader.
#include <fmt/format.h>  // layer names

#include "nn/zoo_builder.h"
#include "nn/zoo_table.h"

namespace dtrain {
namespace {

using config::Bounds;

// mlp: flatten → (linear → relu)* → linear. 784-500-500-10 has 648,010 parameters.
struct MlpOptions {
  std::vector<int64_t> hidden{500, 500};
};

YAML::Node mlp(const MlpOptions& o, const ModelInput& input) {
  LayerList l;
  l.add("flatten", "flatten");
  int i = 1;
  for (const int64_t h : o.hidden) {
    l.linear(fmt::format("fc{}", i), h);
    l.add(fmt::format("relu{}", i), "relu");
    ++i;
  }
  l.linear(fmt::format("fc{}", i), input.classes);
  return l.model();
}

// LeNet-5 (LeCun et al. 1998) with the usual modern substitutions: ReLU instead of the scaled
// tanh and max pooling instead of the trainable average subsampling; C3 fully connected to S2.
// 28×28 inputs (MNIST) get padding 2 on C1 so that C5 sees 16×5×5 as on the original 32×32.
struct LenetOptions {};

YAML::Node lenet(const LenetOptions&, const ModelInput& input) {
  LayerList l;
  const int64_t pad = input.sample_shape[1] < 32 ? 2 : 0;
  l.conv("c1", 6, 5, 1, pad, true);
  l.add("relu1", "relu");
  l.pool("s2", true, 2, 2);
  l.conv("c3", 16, 5, 1, 0, true);
  l.add("relu2", "relu");
  l.pool("s4", true, 2, 2);
  l.add("flatten", "flatten");
  l.linear("f5", 120);
  l.add("relu3", "relu");
  l.linear("f6", 84);
  l.add("relu4", "relu");
  l.linear("f7", input.classes);
  return l.model();
}

// The CIFAR-10 network of cuda-convnet / Caffe's cifar10_quick (the AlexNet-style 3-conv +
// 2-FC model the Pipe-SGD paper trains), with Caffe's ceil-mode pooling; `lrn: true` adds the
// cross-channel normalisation after the first block (cifar10_full uses local_size 3,
// α 5e-5, β 0.75; Caffe's α is divided by the window like PyTorch's). As in Caffe there is no
// ReLU between the two fully connected layers. Caffe's average pooling divides by the window
// part inside the input, hence count_include_pad: false. Initialisation `caffe` (default):
// the prototxt's Gaussians (σ 1e-4 conv1, 1e-2 conv2/3, 1e-1 fc) and zero biases.
struct CifarCnnOptions {
  bool lrn = false;
  enum class Init { caffe, pytorch } init = Init::caffe;
};

YAML::Node cifar_cnn(const CifarCnnOptions& o, const ModelInput& input) {
  LayerList l;
  const bool caffe = o.init == CifarCnnOptions::Init::caffe;
  auto init = [&](YAML::Node e, double std) {
    if (!caffe) return;
    e["weight_init"] = "normal";
    e["init_std"] = std;
    e["bias_init"] = "zero";
  };
  init(l.conv("conv1", 32, 5, 1, 2, true), 1e-4);
  l.pool("pool1", true, 3, 2, 0, true);
  l.add("relu1", "relu");
  if (o.lrn) {
    YAML::Node n = l.add("norm1", "lrn");
    n["size"] = 3;
    n["alpha"] = 5e-5;
    n["beta"] = 0.75;
    n["k"] = 1.0;
  }
  init(l.conv("conv2", 32, 5, 1, 2, true), 1e-2);
  l.add("relu2", "relu");
  l.pool("pool2", false, 3, 2, 0, true)["count_include_pad"] = false;
  init(l.conv("conv3", 64, 5, 1, 2, true), 1e-2);
  l.add("relu3", "relu");
  l.pool("pool3", false, 3, 2, 0, true)["count_include_pad"] = false;
  l.add("flatten", "flatten");
  init(l.linear("ip1", 64), 1e-1);
  init(l.linear("ip2", input.classes), 1e-1);
  return l.model();
}

// torchvision AlexNet (the one-GPU variant of Krizhevsky et al. 2012; 61,100,840 parameters at
// 224×224 and 1000 classes), PyTorch default initialisation. torchvision's adaptive pool to
// 6×6 is the identity at 224×224; other sizes flatten whatever the features give. `lrn: true`
// inserts the paper's response normalisation (size 5, α 1e-4, β 0.75, k 2) after the first two
// ReLUs.
struct AlexnetOptions {
  bool lrn = false;
  double dropout = 0.5;
};

YAML::Node alexnet(const AlexnetOptions& o, const ModelInput& input) {
  LayerList l;
  const bool lrn = o.lrn;
  const double p = o.dropout;
  l.conv("conv1", 64, 11, 4, 2, true);
  l.add("relu1", "relu");
  if (lrn) l.add("lrn1", "lrn");
  l.pool("pool1", true, 3, 2);
  l.conv("conv2", 192, 5, 1, 2, true);
  l.add("relu2", "relu");
  if (lrn) l.add("lrn2", "lrn");
  l.pool("pool2", true, 3, 2);
  l.conv("conv3", 384, 3, 1, 1, true);
  l.add("relu3", "relu");
  l.conv("conv4", 256, 3, 1, 1, true);
  l.add("relu4", "relu");
  l.conv("conv5", 256, 3, 1, 1, true);
  l.add("relu5", "relu");
  l.pool("pool5", true, 3, 2);
  l.add("flatten", "flatten");
  l.add("drop6", "dropout")["p"] = p;
  l.linear("fc6", 4096);
  l.add("relu6", "relu");
  l.add("drop7", "dropout")["p"] = p;
  l.linear("fc7", 4096);
  l.add("relu7", "relu");
  l.linear("fc8", input.classes);
  return l.model();
}

// torchvision VGG-16 (configuration D; 138,357,544 parameters at 224×224 and 1000 classes),
// with torchvision's initialisation: conv kaiming_normal(fan_out, relu) and zero bias, linear
// N(0, 0.01²) and zero bias, batch norm 1 and 0. As for AlexNet the flatten size follows the
// input (7×7×512 at 224×224).
struct Vgg16Options {
  bool batch_norm = false;
  double dropout = 0.5;
};

YAML::Node vgg16(const Vgg16Options& o, const ModelInput& input) {
  LayerList l;
  const bool bn = o.batch_norm;
  const double p = o.dropout;
  const int64_t stages[5][2] = {{64, 2}, {128, 2}, {256, 3}, {512, 3}, {512, 3}};
  for (int s = 0; s < 5; ++s) {
    for (int i = 1; i <= stages[s][1]; ++i) {
      const std::string id = fmt::format("{}_{}", s + 1, i);
      YAML::Node c = l.conv("conv" + id, stages[s][0], 3, 1, 1, true);
      c["weight_init"] = "kaiming_normal_fan_out";
      c["bias_init"] = "zero";
      if (bn) l.add("bn" + id, "batchnorm2d");
      l.add("relu" + id, "relu");
    }
    l.pool(fmt::format("pool{}", s + 1), true, 2, 2);
  }
  l.add("flatten", "flatten");
  auto fc = [&](const std::string& name, int64_t out) {
    YAML::Node e = l.linear(name, out);
    e["weight_init"] = "normal";
    e["init_std"] = 0.01;
    e["bias_init"] = "zero";
  };
  fc("fc6", 4096);
  l.add("relu6", "relu");
  l.add("drop6", "dropout")["p"] = p;
  fc("fc7", 4096);
  l.add("relu7", "relu");
  l.add("drop7", "dropout")["p"] = p;
  fc("fc8", input.classes);
  return l.model();
}

}  // namespace

ZooEntry mlp_model() {
  config::Schema<MlpOptions> s("mlp");
  s.key("hidden", &MlpOptions::hidden, config::list_of(config::integer64(Bounds::above(0))),
        "widths of the hidden layers");
  return zoo_row("mlp",
                 "multilayer perceptron: flatten, then linear + ReLU for each hidden width, then "
                 "the classifier",
                 std::move(s), mlp, false);
}

ZooEntry lenet_model() {
  return zoo_row("lenet", "LeNet-5 (LeCun et al. 1998) with ReLU and max pooling",
                 config::Schema<LenetOptions>("lenet"), lenet);
}

ZooEntry cifar_cnn_model() {
  using Init = CifarCnnOptions::Init;
  config::Schema<CifarCnnOptions> s("cifar_cnn");
  s.key("lrn", &CifarCnnOptions::lrn, config::boolean(),
        "local response normalisation after block 1")
      .key("init", &CifarCnnOptions::init,
           config::enum_choice<Init>({{"caffe", Init::caffe}, {"pytorch", Init::pytorch}}),
           "the prototxt's Gaussians or PyTorch's defaults");
  return zoo_row("cifar_cnn",
                 "the CIFAR-10 network of cuda-convnet / Caffe's cifar10_quick (3 convolutions, "
                 "2 fully connected; the Pipe-SGD paper's)",
                 std::move(s), cifar_cnn);
}

ZooEntry alexnet_model() {
  config::Schema<AlexnetOptions> s("alexnet");
  s.key("lrn", &AlexnetOptions::lrn, config::boolean(), "the original's LRN layers")
      .key("dropout", &AlexnetOptions::dropout, config::real(Bounds::closed_open(0, 1)),
           "dropout before the fully connected layers");
  return zoo_row("alexnet", "torchvision AlexNet (Krizhevsky et al. 2012, the one-GPU variant)",
                 std::move(s), alexnet);
}

ZooEntry vgg16_model() {
  config::Schema<Vgg16Options> s("vgg16");
  s.key("batch_norm", &Vgg16Options::batch_norm, config::boolean(),
        "batch norm after each convolution")
      .key("dropout", &Vgg16Options::dropout, config::real(Bounds::closed_open(0, 1)),
           "dropout in the classifier");
  return zoo_row("vgg16", "torchvision VGG-16 (Simonyan and Zisserman 2015, configuration D)",
                 std::move(s), vgg16);
}

}  // namespace dtrain
