#include "sched/shard/shard_layout.h"

#include <algorithm>  // max, min

#include "comm/ring_allreduce.h"  // ring_block: the blocks the reduce-scatter completes
#include "core/error.h"

namespace dtrain {

ShardLayout::ShardLayout(const std::vector<int64_t>& bounds, int rank, int ranks) {
  DTRAIN_CHECK(ranks >= 1 && rank >= 0 && rank < ranks)
      << "shard of rank " << rank << " of " << ranks;
  for (size_t j = 0; j + 1 < bounds.size(); ++j) {
    const RingBlock b = ring_block(bounds[j + 1] - bounds[j], rank, ranks);
    const ShardPiece piece{bounds[j] + b.begin, b.count, owned_};
    by_segment_.push_back(piece);
    if (piece.count == 0) continue;
    pieces_.push_back(piece);
    owned_ += piece.count;
  }
}

std::vector<ShardPiece> ShardLayout::within(int64_t begin, int64_t end) const {
  std::vector<ShardPiece> out;
  for (const ShardPiece& p : pieces_) {
    const int64_t from = std::max(begin, p.offset), to = std::min(end, p.offset + p.count);
    if (to > from) out.push_back({from, to - from, p.compact + (from - p.offset)});
  }
  return out;
}

}  // namespace dtrain
