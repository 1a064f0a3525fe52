// algorithm.shard: how much of the training state each data-parallel rank keeps whole (ZeRO's
// stages; PyTorch FSDP's sharding strategies). none: all of it (plain data parallelism);
// optimizer: the optimizer state of its 1/p of the parameters only (ZeRO-1); gradients: also the
// gradients of that 1/p only, once reduce-scattered (ZeRO-2); parameters: also the weights of
// that 1/p only, each layer's gathered for its forward and its backward (ZeRO-3, FSDP's full
// shard). The updates are the same in every mode (docs/memory.md).
#pragma once
#include <string>
#include <vector>

namespace dtrain {

enum class ShardMode { none, optimizer, gradients, parameters };

// The key's words, in the order of the modes.
inline const std::vector<std::string>& shard_words() {
  static const std::vector<std::string> words{"none", "optimizer", "gradients", "parameters"};
  return words;
}
// The words of the modes up to `deepest` (an algorithm's `shard` key that offers fewer).
inline std::vector<std::string> shard_words_to(ShardMode deepest) {
  const auto& all = shard_words();
  return {all.begin(), all.begin() + static_cast<int>(deepest) + 1};
}
// The mode a word of shard_words() names (the schema has checked it).
ShardMode shard_mode_named(const std::string& word);
const char* shard_word(ShardMode mode);

// What the mode keeps of its own 1/p only.
inline bool shards_optimizer(ShardMode m) {
  return m != ShardMode::none;
}
inline bool shards_gradients(ShardMode m) {
  return m == ShardMode::gradients || m == ShardMode::parameters;
}
inline bool shards_parameters(ShardMode m) {
  return m == ShardMode::parameters;
}

}  // namespace dtrain
