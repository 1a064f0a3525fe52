// Static memory planning: buffers with known sizes and lifetimes (inclusive step ranges, one or
// two per buffer) get offsets in one arena so that buffers alive at the same step never overlap.
// Greedy by size (largest first, each at the lowest offset that fits among the buffers it overlaps
// in time), the rule TFLite's and ONNX Runtime's planners use; near-optimal on the chains and short
// branches of CNN graphs.
#pragma once
#include <cstdint>  // int64_t
#include <span>
#include <vector>

namespace dtrain {

struct BufferLifetime {
  int64_t size = 0;         // in any unit (the graph plans bytes)
  int first = 0, last = 0;  // steps it is alive at, inclusive
  // A second span at the same offset, none when again_first > again_last: an activation that is
  // recomputed (model.recompute) lives in its block's forward and again from its recomputation
  // to its block's backward, and the memory between the two serves other blocks.
  int again_first = 0, again_last = -1;
};

struct ArenaPlan {
  std::vector<int64_t> offsets;  // per buffer, multiples of `alignment`
  int64_t size = 0;              // the arena
  int64_t unshared = 0;          // the sum of the (aligned) buffers: the arena without reuse
};

ArenaPlan plan_arena(std::span<const BufferLifetime> buffers, int64_t alignment);

}  // namespace dtrain
