// Which elements of the trainable range a rank owns when the state is sharded (algorithm.shard):
// each gradient segment of n elements is cut into p blocks, block c = [n·c/p, n·(c+1)/p), and
// rank r owns block r of every segment — so that a segment's reduce-scatter leaves each rank its
// own block, and its all-gather rebuilds the segment from the blocks. Written once, for the
// sharded scheduler and the memory model (memory_model.h) alike.
#pragma once
#include <cstdint>
#include <vector>

namespace dtrain {

// A contiguous run of the flat buffers: [offset, offset + count).
struct ShardPiece {
  int64_t offset = 0, count = 0;
  bool operator==(const ShardPiece&) const = default;
};

struct ShardLayout {
  // One piece per segment, in the segments' order (pieces[j] is segment j's block; its count is
  // 0 where the segment has fewer elements than there are ranks and this rank's block is empty).
  std::vector<ShardPiece> pieces;
  int64_t owned = 0;  // the pieces' elements together
};

// Block c of a segment of n elements cut into p blocks: its first element, relative to the
// segment. block_start(n, p, p) == n.
inline int64_t block_start(int64_t n, int ranks, int c) {
  return n * c / ranks;
}

// Rank `rank`'s pieces (0 <= rank < ranks) of the segments whose bounds are `bounds`
// (increasing, absolute offsets into the flat buffers; k + 1 bounds for k segments).
ShardLayout shard_layout(const std::vector<int64_t>& bounds, int ranks, int rank);

}  // namespace dtrain
