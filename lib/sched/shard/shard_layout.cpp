#include "sched/shard/shard_layout.h"

#include "core/error.h"

namespace dtrain {

ShardLayout shard_layout(const std::vector<int64_t>& bounds, int ranks, int rank) {
  DTRAIN_CHECK(ranks >= 1 && rank >= 0 && rank < ranks)
      << "rank " << rank << " of " << ranks << " ranks";
  ShardLayout layout;
  for (size_t j = 0; j + 1 < bounds.size(); ++j) {
    const int64_t n = bounds[j + 1] - bounds[j];
    DTRAIN_CHECK(n >= 0) << "segment bounds must not decrease (segment " << j << ")";
    const int64_t begin = block_start(n, ranks, rank), end = block_start(n, ranks, rank + 1);
    layout.pieces.push_back({bounds[j] + begin, end - begin});
    layout.owned += end - begin;
  }
  return layout;
}

}  // namespace dtrain
