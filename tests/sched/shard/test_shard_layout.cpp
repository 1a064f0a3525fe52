// ShardLayout: rank r owns block r of every segment, block c = [n·c/p, n·(c+1)/p); checked on
// hand-cut examples (p dividing the segments or not, a segment smaller than p) and, over many
// shapes, that the ranks' pieces tile every segment exactly once and that their compact offsets
// lay them end to end.
#include <doctest/doctest.h>

#include <random>  // mt19937_64: the shapes
#include <vector>

#include "sched/gradient_segments.h"  // segment_bounds
#include "sched/shard/shard_layout.h"

using namespace dtrain;

namespace {
// (offset, count) of each piece, for comparing with hand-cut ones.
std::vector<std::pair<int64_t, int64_t>> runs(const std::vector<ShardPiece>& pieces) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const ShardPiece& p : pieces) out.emplace_back(p.offset, p.count);
  return out;
}
using Runs = std::vector<std::pair<int64_t, int64_t>>;
}  // namespace

TEST_CASE("rank r owns block r of every segment, p not dividing the segments") {
  // Segments [10, 20) and [20, 33): 10 and 13 elements over 3 ranks.
  const std::vector<int64_t> bounds{10, 20, 33};
  const ShardLayout r0(bounds, 0, 3), r1(bounds, 1, 3), r2(bounds, 2, 3);
  // 10: blocks [0, 3) [3, 6) [6, 10); 13: [0, 4) [4, 8) [8, 13).
  CHECK(runs(r0.pieces()) == Runs{{10, 3}, {20, 4}});
  CHECK(runs(r1.pieces()) == Runs{{13, 3}, {24, 4}});
  CHECK(runs(r2.pieces()) == Runs{{16, 4}, {28, 5}});
  CHECK(r0.owned() == 7);
  CHECK(r1.owned() == 7);
  CHECK(r2.owned() == 9);
  CHECK(r2.pieces()[1].compact == 4);
  // Clipped to a range, the compact offsets move with the clip.
  const std::vector<ShardPiece> part = r2.within(18, 30);
  CHECK(runs(part) == Runs{{18, 2}, {28, 2}});
  CHECK(part[0].compact == 2);
  CHECK(part[1].compact == 4);
}

TEST_CASE("a segment smaller than the ranks leaves some ranks no piece of it") {
  const std::vector<int64_t> bounds{0, 2};  // 2 elements over 4 ranks: 0, 1, 0, 1
  CHECK(ShardLayout(bounds, 0, 4).pieces().empty());
  CHECK(runs(ShardLayout(bounds, 1, 4).pieces()) == Runs{{0, 1}});
  CHECK(ShardLayout(bounds, 2, 4).piece_of_segment(0).count == 0);
  CHECK(runs(ShardLayout(bounds, 3, 4).pieces()) == Runs{{1, 1}});
}

TEST_CASE("one rank owns every segment whole; no segment, nothing") {
  const ShardLayout all({5, 9, 17}, 0, 1);
  CHECK(runs(all.pieces()) == Runs{{5, 4}, {9, 8}});
  CHECK(all.owned() == 12);
  CHECK(ShardLayout({}, 2, 4).owned() == 0);
  CHECK(ShardLayout({7}, 2, 4).pieces().empty());
}

TEST_CASE("the ranks' pieces tile every segment exactly once, in rank order") {
  std::mt19937_64 rng(51);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t begin = static_cast<int64_t>(rng() % 50);
    const int64_t n = static_cast<int64_t>(rng() % 5000);
    const int64_t segments = 1 + static_cast<int64_t>(rng() % 9);
    const int ranks = 1 + static_cast<int>(rng() % 17);
    const std::vector<int64_t> bounds = segment_bounds(begin, begin + n, segments);
    std::vector<ShardLayout> layouts;
    for (int r = 0; r < ranks; ++r) layouts.emplace_back(bounds, r, ranks);
    for (size_t j = 0; j + 1 < bounds.size(); ++j) {
      int64_t next = bounds[j];
      for (int r = 0; r < ranks; ++r) {
        const ShardPiece piece = layouts[r].piece_of_segment(j);
        REQUIRE(piece.offset == next);
        // Blocks differ by at most one element.
        const int64_t size = bounds[j + 1] - bounds[j];
        CHECK(piece.count >= size / ranks);
        CHECK(piece.count <= size / ranks + 1);
        next += piece.count;
      }
      CHECK(next == bounds[j + 1]);
    }
    int64_t owned = 0;
    for (const ShardLayout& l : layouts) {
      int64_t compact = 0;
      for (const ShardPiece& p : l.pieces()) {
        CHECK(p.compact == compact);
        compact += p.count;
      }
      CHECK(compact == l.owned());
      owned += l.owned();
    }
    CHECK(owned == n);
  }
}
