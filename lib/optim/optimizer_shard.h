// The part of the flat buffers an optimizer owns in sharded training (ZeRO: algorithm.shard):
// pieces of the model's layout, in buffer order. Its state holds those pieces only, end to end
// (the "compact" layout of the rank's shard); sched/shard/shard_layout.h says which pieces.
#pragma once
#include <cstdint>

namespace dtrain {

struct ShardPiece {
  int64_t offset = 0;   // in the model's flat buffer
  int64_t count = 0;    // elements
  int64_t compact = 0;  // where it starts in the shard
};

}  // namespace dtrain
