// The memory model against figures computed by hand from docs/memory.md's formulas: a model of
// 1000 parameters, the first 100 frozen, 50 BatchNorm statistics, AdamW (2 state floats), 4
// ranks, 3 gradient segments of 300, 301 and 299 elements (4 divides none of the last two),
// accumulation over 2 micro-batches, 10 000 bytes of activations (4 000 recomputing).
#include <doctest/doctest.h>

#include "sched/shard/memory_model.h"

using namespace dtrain;

namespace {

MemoryInputs example(ShardMode shard) {
  MemoryInputs in;
  in.parameters = 1000;
  in.trainable_offset = 100;
  in.buffer_elements = 50;
  in.optimizer_states = 2;
  in.ranks = 4;
  in.shard = shard;
  in.segments = {100, 400, 701, 1000};
  in.accumulation_steps = 2;
  in.activations = 10000;
  in.activations_recompute = 4000;
  return in;
}

}  // namespace

// Blocks of 300: 75 each; of 301: 75, 75, 75, 76; of 299: 74, 75, 75, 75. Rank 3 owns
// 75 + 76 + 75 = 226 elements, rank 0 75 + 75 + 74 = 224. Two segments in flight: at most
// 300 + 301 = 601 elements. A sharded rank's ring receives a block of the largest segment:
// ⌈301 / 4⌉ = 76 elements, 304 bytes.

TEST_CASE("none: every rank holds the whole state") {
  const RankMemory m = largest_rank_memory(example(ShardMode::none));
  CHECK(m.weights == 4000);       // 4 · 1000
  CHECK(m.gradients == 3600);     // 4 · 900 trainable
  CHECK(m.optimizer == 7200);     // 4 · 2 · 900
  CHECK(m.buffers == 200);        // 4 · 50
  CHECK(m.accumulation == 3600);  // 4 · 900
  CHECK(m.working_set == 0);
  CHECK(m.total() == 28600);  // with the 10 000 bytes of activations
  CHECK(m.total_with(true) == 22600);
}

TEST_CASE("optimizer (ZeRO-1): the optimizer state of the rank's blocks only") {
  const RankMemory m = largest_rank_memory(example(ShardMode::optimizer));
  CHECK(m.rank == 3);
  CHECK(m.weights == 4000);
  CHECK(m.gradients == 3600);
  CHECK(m.optimizer == 1808);   // 4 · 2 · 226
  CHECK(m.working_set == 304);  // the ring's block
  CHECK(m.total() == 23512);
  CHECK(rank_memory(example(ShardMode::optimizer), 0).optimizer == 1792);  // 4 · 2 · 224
}

TEST_CASE("gradients (ZeRO-2): and the gradients of its blocks, two segments in flight") {
  const RankMemory m = largest_rank_memory(example(ShardMode::gradients));
  CHECK(m.weights == 4000);
  CHECK(m.gradients == 904);     // 4 · 226
  CHECK(m.optimizer == 1808);    // 4 · 2 · 226
  CHECK(m.working_set == 2708);  // 4 · 601 + the ring's 304
  CHECK(m.total() == 23220);
}

TEST_CASE("parameters (ZeRO-3): and the weights of its blocks, two segments gathered") {
  const RankMemory m = largest_rank_memory(example(ShardMode::parameters));
  CHECK(m.weights == 1304);      // 4 · (100 frozen + 226)
  CHECK(m.gradients == 904);     // 4 · 226
  CHECK(m.optimizer == 1808);    // 4 · 2 · 226
  CHECK(m.working_set == 5112);  // 4 · 601 gathered + 4 · 601 in flight + the ring's 304
  CHECK(m.accumulation == 3600);
  CHECK(m.total() == 22928);
  CHECK(m.total_with(true) == 16928);
  const RankMemory first = rank_memory(example(ShardMode::parameters), 0);
  CHECK(first.weights == 1296);                     // 4 · (100 + 224)
  CHECK(first.total() == 22928 - 2 * (4 + 4 + 8));  // 2 elements fewer, 16 bytes each
}

TEST_CASE("one segment: the whole range is in flight; one rank: sharding keeps it all") {
  MemoryInputs in = example(ShardMode::gradients);
  in.segments = {100, 1000};
  CHECK(largest_rank_memory(in).working_set == 3600 + 900);  // 4 · 900, the ring's 4 · 225
  in.codec = true;  // a codec's ring also keeps the block it sends
  CHECK(largest_rank_memory(in).working_set == 3600 + 1800);
  in.codec = false;
  in.ranks = 1;
  in.accumulation_steps = 1;
  const RankMemory alone = largest_rank_memory(in);
  CHECK(alone.gradients == 3600);
  CHECK(alone.optimizer == 7200);
  CHECK(alone.accumulation == 0);
}

TEST_CASE("sizes are shown in decimal units") {
  CHECK(human_bytes(900) == "900 B");
  CHECK(human_bytes(1500) == "1.5 kB");
  CHECK(human_bytes(512'000'000) == "512.0 MB");
  CHECK(human_bytes(12'345'678'901) == "12.35 GB");
}

// With what each layer reads: three layers over [100, 400), [400, 701), [701, 1000) — one
// segment each — and a fourth, tied, reading the first layer's range again (a GPT's head).
// Rank 3's unowned elements per segment: 300 − 75 = 225, 301 − 76 = 225, 299 − 75 = 224.
TEST_CASE("the working set from the layers' reads: used, prefetched and tied segments") {
  MemoryInputs in = example(ShardMode::parameters);
  in.layer_reads = {{{100, 400}}, {{400, 701}}, {{701, 1000}}, {{100, 400}}};
  const RankMemory p = rank_memory(in, 3);
  // Weights: a layer's segment and the next or previous one, at most 225 + 225 = 450; the
  // gradients: a layer's, the one after it still reducing, and the tied segment 0 throughout:
  // at the first layer 225 + 225, at the second 225 + 224 + 225 = 674. Ring block: 76.
  CHECK(p.working_set == 4 * (450 + 674 + 76));
  in.shard = ShardMode::gradients;
  CHECK(rank_memory(in, 3).working_set == 4 * (674 + 76));
  in.layer_reads.pop_back();  // untied: the first layer's and the second, 225 + 225
  CHECK(rank_memory(in, 3).working_set == 4 * (450 + 76));
}

TEST_CASE("a backend that does not give memory back keeps sharded gradients and weights whole") {
  MemoryInputs in = example(ShardMode::parameters);
  in.releases = false;
  const RankMemory m = rank_memory(in, 3);
  CHECK(m.weights == 4000);
  CHECK(m.gradients == 3600);
  CHECK(m.optimizer == 1808);   // the optimizer's state is its own allocation: still sharded
  CHECK(m.working_set == 304);  // the ring's block only
}
