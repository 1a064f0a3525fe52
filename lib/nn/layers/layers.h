// The layer types and their options. Each layer lives in its own file; the graph builder and
// the tests construct them through these factories.
#pragma once
#include <memory>  // unique_ptr

#include "backend/ops.h"  // PoolKind
#include "nn/layer.h"     // Layer

namespace dtrain {

// How a weight tensor is initialised. `pytorch` is PyTorch's default for Linear and Conv2d,
// kaiming_uniform(a=√5), i.e. U(±1/√fan_in); the reference models override it (torchvision
// ResNet/VGG convolutions: kaiming_normal fan_out; VGG linear: N(0, 0.01²)).
enum class WeightInit { pytorch, kaiming_normal_fan_out, kaiming_normal_fan_in, normal };
// `pytorch`: U(±1/√fan_in) as nn.Linear / nn.Conv2d; `zero`: as torchvision VGG.
enum class BiasInit { pytorch, zero };

struct LinearConfig {
  int64_t out_features = 0;
  int64_t in_features = 0;  // 0: inferred from the input
  bool bias = true;
  WeightInit weight_init = WeightInit::pytorch;
  float init_std = 0.01f;  // WeightInit::normal
  BiasInit bias_init = BiasInit::pytorch;
};

struct Conv2dConfig {
  int64_t out_channels = 0;
  int64_t in_channels = 0;  // 0: inferred from the input
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool bias = true;
  WeightInit weight_init = WeightInit::pytorch;
  float init_std = 0.01f;
  BiasInit bias_init = BiasInit::pytorch;
};

struct Pool2dConfig {
  PoolKind kind = PoolKind::max;
  int64_t kernel_h = 2, kernel_w = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling, PyTorch's default
};

struct LrnConfig {
  int64_t size = 5;
  float alpha = 1e-4f, beta = 0.75f, k = 2.0f;  // PyTorch LocalResponseNorm / AlexNet paper
};

struct BatchNormConfig {
  float epsilon = 1e-5f;
  float momentum = 0.1f;  // running = (1 − m)·running + m·batch, as PyTorch
};

// Option-A shortcut of the CIFAR ResNets (He et al. 2016, §4.2): subsample by `stride`, then
// pad channels with zeros on both sides up to `out_channels`. No parameters.
struct ChannelPadConfig {
  int64_t out_channels = 0;
  int64_t stride = 1;
};

std::unique_ptr<Layer> make_linear(const LinearConfig& config);
std::unique_ptr<Layer> make_conv2d(const Conv2dConfig& config);
std::unique_ptr<Layer> make_pool2d(const Pool2dConfig& config);
std::unique_ptr<Layer> make_global_avgpool();
std::unique_ptr<Layer> make_relu();
std::unique_ptr<Layer> make_lrn(const LrnConfig& config);
std::unique_ptr<Layer> make_dropout(float p);
std::unique_ptr<Layer> make_batchnorm2d(const BatchNormConfig& config);
std::unique_ptr<Layer> make_flatten();
std::unique_ptr<Layer> make_add();
std::unique_ptr<Layer> make_channel_pad(const ChannelPadConfig& config);

// Initialisation of a weight with the given fan-in/fan-out (see WeightInit).
ParamInit weight_init(WeightInit kind, int64_t fan_in, int64_t fan_out, float std);
ParamInit bias_init(BiasInit kind, int64_t fan_in);

}  // namespace dtrain
