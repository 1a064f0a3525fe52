#include "sched/shard/shard_mode.h"

#include "core/error.h"

namespace dtrain {

ShardMode shard_mode_named(const std::string& word) {
  const auto& words = shard_words();
  for (size_t i = 0; i < words.size(); ++i)
    if (words[i] == word) return static_cast<ShardMode>(i);
  throw Error("algorithm.shard: no mode '" + word + "'");
}

const char* shard_word(ShardMode mode) {
  return shard_words()[static_cast<size_t>(mode)].c_str();
}

}  // namespace dtrain
