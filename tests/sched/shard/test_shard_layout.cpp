// shard_layout: rank r owns block r of every segment, block c = [n·c/p, n·(c+1)/p); checked on
// hand-cut examples (p dividing the segments or not, a segment smaller than p) and, over many
// shapes, that the ranks' pieces tile every segment exactly once.
#include <doctest/doctest.h>

#include <random>  // mt19937_64: the shapes
#include <vector>

#include <random>                     // mt19937_64: the shapes
#include "sched/gradient_segments.h"  // segment_bounds
#include "sched/shard/shard_layout.h"

using namespace dtrain;

TEST_CASE("rank r owns block r of every segment, p not dividing the segments") {
  // Segments [10, 20) and [20, 33): 10 and 13 elements over 3 ranks.
  const std::vector<int64_t> bounds{10, 20, 33};
  const ShardLayout r0 = shard_layout(bounds, 3, 0);
  const ShardLayout r1 = shard_layout(bounds, 3, 1);
  const ShardLayout r2 = shard_layout(bounds, 3, 2);
  // 10: blocks [0, 3) [3, 6) [6, 10); 13: [0, 4) [4, 8) [8, 13).
  CHECK(r0.pieces == std::vector<ShardPiece>{{10, 3}, {20, 4}});
  CHECK(r1.pieces == std::vector<ShardPiece>{{13, 3}, {24, 4}});
  CHECK(r2.pieces == std::vector<ShardPiece>{{16, 4}, {28, 5}});
  CHECK(r0.owned == 7);
  CHECK(r1.owned == 7);
  CHECK(r2.owned == 9);
}

TEST_CASE("a segment smaller than the ranks leaves some ranks an empty block") {
  const std::vector<int64_t> bounds{0, 2};  // 2 elements over 4 ranks: 0, 1, 0, 1
  CHECK(shard_layout(bounds, 4, 0).pieces == std::vector<ShardPiece>{{0, 0}});
  CHECK(shard_layout(bounds, 4, 1).pieces == std::vector<ShardPiece>{{0, 1}});
  CHECK(shard_layout(bounds, 4, 2).pieces == std::vector<ShardPiece>{{1, 0}});
  CHECK(shard_layout(bounds, 4, 3).pieces == std::vector<ShardPiece>{{1, 1}});
}

TEST_CASE("one rank owns every segment whole; no segment, nothing") {
  const ShardLayout all = shard_layout({5, 9, 17}, 1, 0);
  CHECK(all.pieces == std::vector<ShardPiece>{{5, 4}, {9, 8}});
  CHECK(all.owned == 12);
  CHECK(shard_layout({}, 4, 2).owned == 0);
  CHECK(shard_layout({7}, 4, 2).pieces.empty());
}

TEST_CASE("the ranks' pieces tile every segment exactly once, in rank order") {
  std::mt19937_64 rng(51);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t begin = static_cast<int64_t>(rng() % 50);
    const int64_t n = static_cast<int64_t>(rng() % 5000);
    const int64_t segments = 1 + static_cast<int64_t>(rng() % 9);
    const int ranks = 1 + static_cast<int>(rng() % 17);
    const std::vector<int64_t> bounds = segment_bounds(begin, begin + n, segments);
    int64_t owned = 0;
    std::vector<ShardLayout> layouts;
    for (int r = 0; r < ranks; ++r) layouts.push_back(shard_layout(bounds, ranks, r));
    for (size_t j = 0; j + 1 < bounds.size(); ++j) {
      int64_t next = bounds[j];
      for (int r = 0; r < ranks; ++r) {
        const ShardPiece& piece = layouts[r].pieces.at(j);
        REQUIRE(piece.offset == next);
        // Blocks differ by at most one element.
        const int64_t size = bounds[j + 1] - bounds[j];
        CHECK(piece.count >= size / ranks);
        CHECK(piece.count <= size / ranks + 1);
        next += piece.count;
      }
      CHECK(next == bounds[j + 1]);
    }
    for (const ShardLayout& l : layouts) owned += l.owned;
    CHECK(owned == n);
  }
}
