// A checked `layers:` list → Graph nodes. Every value here was validated by check_layer_list,
// so plain conversions suffice.
#include <tuple>    // tie
#include <utility>  // pair

#include "nn/layers/layers.h"
#include "nn/spec.h"

namespace dtrain {
namespace {

std::pair<int64_t, int64_t> pair_of(const YAML::Node& v) {
  if (v.IsSequence()) return {v[0].as<int64_t>(), v[1].as<int64_t>()};
  const auto x = v.as<int64_t>();
  return {x, x};
}

WeightInit weight_init_of(const YAML::Node& e) {
  const auto s = e["weight_init"].as<std::string>("pytorch");
  if (s == "kaiming_normal_fan_out") return WeightInit::kaiming_normal_fan_out;
  if (s == "kaiming_normal_fan_in") return WeightInit::kaiming_normal_fan_in;
  if (s == "normal") return WeightInit::normal;
  return WeightInit::pytorch;
}

BiasInit bias_init_of(const YAML::Node& e) {
  return e["bias_init"].as<std::string>("pytorch") == "zero" ? BiasInit::zero : BiasInit::pytorch;
}

Pool2dConfig pool_config(const YAML::Node& e, PoolKind kind) {
  Pool2dConfig c;
  c.kind = kind;
  std::tie(c.kernel_h, c.kernel_w) = pair_of(e["kernel"]);
  std::tie(c.stride_h, c.stride_w) = e["stride"] ? pair_of(e["stride"]) : pair_of(e["kernel"]);
  std::tie(c.pad_h, c.pad_w) = e["padding"] ? pair_of(e["padding"]) : std::pair<int64_t, int64_t>{};
  c.ceil_mode = e["ceil_mode"].as<bool>(false);
  c.count_include_pad = e["count_include_pad"].as<bool>(true);
  return c;
}

std::unique_ptr<Layer> make_layer(const YAML::Node& e) {
  const auto type = e["type"].as<std::string>();
  if (type == "linear") {
    LinearConfig c;
    c.out_features = e["out_features"].as<int64_t>();
    c.in_features = e["in_features"].as<int64_t>(0);
    c.bias = e["bias"].as<bool>(true);
    c.weight_init = weight_init_of(e);
    c.init_std = e["init_std"].as<float>(0.01f);
    c.bias_init = bias_init_of(e);
    return make_linear(c);
  }
  if (type == "conv2d") {
    Conv2dConfig c;
    c.out_channels = e["out_channels"].as<int64_t>();
    c.in_channels = e["in_channels"].as<int64_t>(0);
    std::tie(c.kernel_h, c.kernel_w) = pair_of(e["kernel"]);
    if (e["stride"]) std::tie(c.stride_h, c.stride_w) = pair_of(e["stride"]);
    if (e["padding"]) std::tie(c.pad_h, c.pad_w) = pair_of(e["padding"]);
    c.bias = e["bias"].as<bool>(true);
    c.weight_init = weight_init_of(e);
    c.init_std = e["init_std"].as<float>(0.01f);
    c.bias_init = bias_init_of(e);
    return make_conv2d(c);
  }
  if (type == "maxpool2d") return make_pool2d(pool_config(e, PoolKind::max));
  if (type == "avgpool2d") return make_pool2d(pool_config(e, PoolKind::avg));
  if (type == "global_avgpool") return make_global_avgpool();
  if (type == "relu") return make_relu();
  if (type == "lrn") {
    LrnConfig c;
    c.size = e["size"].as<int64_t>(c.size);
    c.alpha = e["alpha"].as<float>(c.alpha);
    c.beta = e["beta"].as<float>(c.beta);
    c.k = e["k"].as<float>(c.k);
    return make_lrn(c);
  }
  if (type == "dropout") return make_dropout(e["p"].as<float>(0.5f));
  if (type == "batchnorm2d") {
    BatchNormConfig c;
    c.epsilon = e["eps"].as<float>(c.epsilon);
    c.momentum = e["momentum"].as<float>(c.momentum);
    return make_batchnorm2d(c);
  }
  if (type == "flatten") return make_flatten();
  if (type == "add") return make_add();
  if (type == "channel_pad") {
    ChannelPadConfig c;
    c.out_channels = e["out_channels"].as<int64_t>();
    c.stride = e["stride"].as<int64_t>(1);
    return make_channel_pad(c);
  }
  DTRAIN_CHECK(false) << "unchecked layer type '" << type << "'";
  return nullptr;
}

}  // namespace

std::vector<GraphNode> make_nodes(const YAML::Node& layers) {
  std::vector<GraphNode> nodes;
  for (const YAML::Node& e : layers) {
    GraphNode node;
    node.name = e["name"].as<std::string>();
    node.layer = make_layer(e);
    if (e["inputs"])
      for (const YAML::Node& in : e["inputs"]) node.inputs.push_back(in.as<std::string>());
    nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace dtrain
