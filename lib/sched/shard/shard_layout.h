// Which part of the flat buffers a rank owns in sharded training (algorithm.shard): the ring's
// block rank() of every gradient segment (ring_allreduce.h: ring_block), since that is the part
// its reduce-scatter leaves complete there. The pieces are in buffer order; a rank's shard of a
// flat buffer is their concatenation (the compact layout of its optimizer state and, sharding
// gradients or weights, of those).
#pragma once
#include <cstddef>  // size_t
#include <cstdint>
#include <vector>

#include "optim/optimizer_shard.h"  // ShardPiece

namespace dtrain {

class ShardLayout {
 public:
  // Rank `rank` of `ranks` over segments with boundaries `bounds` (increasing; segment j is
  // [bounds[j], bounds[j + 1])). Empty pieces (a segment smaller than the ranks) are left out.
  ShardLayout(const std::vector<int64_t>& bounds, int rank, int ranks);

  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  // Elements this rank owns: the size of its shard.
  int64_t owned() const { return owned_; }
  // The pieces within [begin, end), clipped to it (compact offsets moved with the clip).
  std::vector<ShardPiece> within(int64_t begin, int64_t end) const;
  // This rank's piece of segment j (count 0 when the segment has none for it).
  ShardPiece piece_of_segment(size_t j) const { return by_segment_[j]; }

 private:
  std::vector<ShardPiece> pieces_;
  std::vector<ShardPiece> by_segment_;
  int64_t owned_ = 0;
};

}  // namespace dtrain
