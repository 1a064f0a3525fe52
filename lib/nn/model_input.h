// The plain descriptions of a model that the files below Model share with it: what a model is
// built for (ModelInput), where its parameterised layers lie in the flat buffers (LayerRange) and
// its weights by name (WeightSlot). Kept apart from model.h so that the graph, the spec reader and
// the zoo table need not include the Model they are used to build.
#pragma once
#include <cstdint>  // int64_t
#include <string>
#include <utility>  // pair: weight ranges
#include <vector>

#include "core/dtype.h"  // DType
#include "core/shape.h"  // Shape

namespace dtrain {

struct ModelInput {
  Shape sample_shape;  // [C, H, W]
  int64_t classes = 10;
  int64_t batch = 1;
  // How the model computes: f32, or bf16 mixed precision (Graph::use_precision).
  DType precision = DType::f32;
};
// Elements of one parameterised layer in the flat buffers.
struct LayerRange {
  std::string name, type;
  int64_t offset = 0, count = 0;
};
// Ranges [begin, end) of the flat parameter buffer a layer reads (its own, and a tied layer's
// lender's), in buffer order.
using WeightRanges = std::vector<std::pair<int64_t, int64_t>>;

// One named tensor of a model's weights, named as PyTorch's state_dict names it ("<layer>.<name>":
// "fc1.weight", "bn1.running_mean"): a parameter at `offset` of the flat parameters(), or a
// non-trainable buffer (BatchNorm's running statistics) at `offset` of the flat buffers().
struct WeightSlot {
  std::string name;
  Shape shape;
  bool buffer = false;
  int64_t offset = 0;
  // Other names of the same tensor (a tied output head's "lm_head.weight"): never written,
  // accepted in a file when equal to it.
  std::vector<std::string> aliases;
};

}  // namespace dtrain
