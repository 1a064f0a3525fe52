// The ResNets. resnet18 / resnet50 are torchvision's definitions (11,689,512 and 25,557,032
// parameters at 1000 classes; stride on the 3×3 convolution of the bottleneck, "v1.5") with
// torchvision's initialisation: conv kaiming_normal(fan_out, relu), batch norm 1 and 0, the fc
// PyTorch's default. `small_input` (automatic for inputs of at most 64 pixels) replaces the
// 7×7/2 stem and its max pool by a 3×3/1 convolution, the usual CIFAR adaptation.
// resnet20 is the CIFAR network of He et al. 2016 §4.2: a 3×3 stem, 3 stages of 3 basic blocks
// with 16/32/64 channels and option-A (parameter-free, zero-padded) shortcuts, global average
// pool, fc; 269,722 parameters at 10 classes (`shortcut: B`, 1×1 projections: 272,474). Its
// initialisation is the common PyTorch port's: kaiming_normal (fan_in) for conv and fc weights.
#include <fmt/format.h>  // layer names

#include <algorithm>  // max

#include "nn/zoo_builder.h"
#include "nn/zoo_table.h"

namespace dtrain {
namespace {

struct ResnetBuilder {
  LayerList l;
  std::string conv_init;  // weight_init of every convolution

  // conv (no bias) → batch norm [→ relu]; returns the last name.
  std::string conv_bn(const std::string& prefix, const std::string& suffix, int64_t out,
                      int64_t kernel, int64_t stride, bool relu,
                      const std::vector<std::string>& inputs = {}) {
    l.conv(prefix + "conv" + suffix, out, kernel, stride, kernel / 2, false,
           inputs)["weight_init"] = conv_init;
    l.add(prefix + "bn" + suffix, "batchnorm2d");
    if (relu) l.add(prefix + "relu" + suffix, "relu");
    return l.last();
  }

  // 1×1 projection + batch norm on the block input (option B / torchvision downsample).
  std::string projection(const std::string& prefix, const std::string& in, int64_t out,
                         int64_t stride) {
    l.conv(prefix + "downsample.0", out, 1, stride, 0, false, {in})["weight_init"] = conv_init;
    l.add(prefix + "downsample.1", "batchnorm2d");
    return l.last();
  }

  std::string basic(const std::string& prefix, const std::string& in, int64_t in_ch, int64_t planes,
                    int64_t stride, char shortcut) {
    l.block(prefix.substr(0, prefix.size() - 1));  // "layer1.0": the residual block
    conv_bn(prefix, "1", planes, 3, stride, true, {in});
    conv_bn(prefix, "2", planes, 3, 1, false);
    std::string sc = in;
    if (stride != 1 || in_ch != planes) {
      if (shortcut == 'A') {
        YAML::Node pad = l.add(prefix + "shortcut", "channel_pad", {in});
        pad["out_channels"] = planes;
        pad["stride"] = stride;
        sc = l.last();
      } else {
        sc = projection(prefix, in, planes, stride);
      }
    }
    // The residual branch ends at bn2, which the shortcut entries may follow in the list.
    l.add(prefix + "add", "add", {prefix + "bn2", sc});
    l.add(prefix + "relu", "relu");
    l.block("");
    return l.last();
  }

  std::string bottleneck(const std::string& prefix, const std::string& in, int64_t in_ch,
                         int64_t planes, int64_t stride) {
    l.block(prefix.substr(0, prefix.size() - 1));
    conv_bn(prefix, "1", planes, 1, 1, true, {in});
    conv_bn(prefix, "2", planes, 3, stride, true);
    conv_bn(prefix, "3", planes * 4, 1, 1, false);
    std::string sc = in;
    if (stride != 1 || in_ch != planes * 4) sc = projection(prefix, in, planes * 4, stride);
    l.add(prefix + "add", "add", {prefix + "bn3", sc});
    l.add(prefix + "relu", "relu");
    l.block("");
    return l.last();
  }

  void head(int64_t classes, bool kaiming_fc) {
    l.add("avgpool", "global_avgpool");
    l.add("flatten", "flatten");
    YAML::Node fc = l.linear("fc", classes);
    if (kaiming_fc) fc["weight_init"] = "kaiming_normal_fan_in";
  }
};

struct ResnetOptions {
  config::WordOr<bool> small_input = config::WordOr<bool>::named("auto");
};

config::Schema<ResnetOptions> resnet_schema() {
  config::Schema<ResnetOptions> s("resnet");
  s.key("small_input", &ResnetOptions::small_input, config::word_or({"auto"}, config::boolean()),
        "CIFAR-style stem (3×3 conv, no pooling); auto: for inputs of at most 64 pixels");
  return s;
}

YAML::Node torchvision_resnet(bool bottleneck, const ResnetOptions& o, const ModelInput& input) {
  ResnetBuilder b;
  b.conv_init = "kaiming_normal_fan_out";
  const bool small_input = o.small_input.is("auto")
                               ? std::max(input.sample_shape[1], input.sample_shape[2]) <= 64
                               : o.small_input.value;
  if (small_input) {
    b.conv_bn("", "1", 64, 3, 1, true);
  } else {
    b.conv_bn("", "1", 64, 7, 2, true);
    b.l.pool("maxpool", true, 3, 2, 1);
  }
  const int blocks18[4] = {2, 2, 2, 2}, blocks50[4] = {3, 4, 6, 3};
  std::string x = b.l.last();
  int64_t channels = 64;
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = int64_t{64} << s;
    for (int i = 0; i < (bottleneck ? blocks50 : blocks18)[s]; ++i) {
      const std::string prefix = fmt::format("layer{}.{}.", s + 1, i);
      const int64_t stride = (s > 0 && i == 0) ? 2 : 1;
      x = bottleneck ? b.bottleneck(prefix, x, channels, planes, stride)
                     : b.basic(prefix, x, channels, planes, stride, 'B');
      channels = bottleneck ? planes * 4 : planes;
    }
  }
  b.head(input.classes, false);
  return b.l.model();
}

struct Resnet20Options {
  char shortcut = 'A';  // A: zero-padded identity; B: 1×1 projection
};

YAML::Node resnet20(const Resnet20Options& o, const ModelInput& input) {
  ResnetBuilder b;
  b.conv_init = "kaiming_normal_fan_in";
  const char shortcut = o.shortcut;
  b.conv_bn("", "1", 16, 3, 1, true);
  std::string x = b.l.last();
  int64_t channels = 16;
  for (int s = 0; s < 3; ++s) {
    const int64_t planes = int64_t{16} << s;
    for (int i = 0; i < 3; ++i) {
      const int64_t stride = (s > 0 && i == 0) ? 2 : 1;
      x = b.basic(fmt::format("layer{}.{}.", s + 1, i), x, channels, planes, stride, shortcut);
      channels = planes;
    }
  }
  b.head(input.classes, true);
  return b.l.model();
}

}  // namespace

ZooEntry resnet18_model() {
  ZooEntry row = zoo_row("resnet18", "torchvision ResNet-18 (He et al. 2016): basic blocks",
                         resnet_schema(), [](const ResnetOptions& o, const ModelInput& input) {
                           return torchvision_resnet(false, o, input);
                         });
  row.blocks = true;
  return row;
}

ZooEntry resnet50_model() {
  ZooEntry row = zoo_row("resnet50",
                         "torchvision ResNet-50 (He et al. 2016): bottleneck blocks, the stride on "
                         "their 3×3 convolution (v1.5)",
                         resnet_schema(), [](const ResnetOptions& o, const ModelInput& input) {
                           return torchvision_resnet(true, o, input);
                         });
  row.blocks = true;
  return row;
}

ZooEntry resnet20_model() {
  config::Schema<Resnet20Options> s("resnet20");
  s.key("shortcut", &Resnet20Options::shortcut, config::enum_choice<char>({{"A", 'A'}, {"B", 'B'}}),
        "A: identity with zero-padded channels; B: 1×1 projection");
  ZooEntry row = zoo_row("resnet20",
                         "the CIFAR ResNet of He et al. 2016 §4.2: 3 stages of 3 basic blocks, "
                         "16/32/64 channels",
                         std::move(s), resnet20);
  row.blocks = true;
  return row;
}

}  // namespace dtrain
