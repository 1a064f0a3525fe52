// What one rank of a data-parallel job holds, in bytes, for each algorithm.shard mode
// (docs/memory.md, "What a rank holds"): the figures of --dry-run's memory table, of the start-up
// check against cluster.memory_per_rank and of `dtrain plan`'s memory column. Pure arithmetic on
// sizes: nothing is built or allocated. Every buffer is f32 (bf16 changes the activations only,
// which the caller estimates: Graph::estimate_activation_bytes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/model_input.h"          // WeightRanges
#include "sched/shard/shard_mode.h"  // ShardMode

namespace dtrain {

// Gradient segments in flight, and gathered weight segments, a sharded rank holds at once: the
// one in use and the next (ZeRO-3's prefetch; the reduce-scatter of one segment while backward
// fills the next).
inline constexpr int kSegmentsInFlight = 2;

struct MemoryInputs {
  int64_t parameters = 0;        // the flat buffer's elements, frozen ones included
  int64_t trainable_offset = 0;  // [0, trainable_offset) is frozen: weights only, never sharded
  int64_t buffer_elements = 0;   // non-trainable state (BatchNorm's statistics): whole everywhere
  int optimizer_states = 0;      // the optimizer's state floats per trainable parameter
  int ranks = 1;                 // p, the data-parallel ranks
  ShardMode shard = ShardMode::none;
  // Bounds of the gradient segments over [trainable_offset, parameters) (absolute offsets; k + 1
  // for k segments): how the sharded state is cut (shard_layout.h).
  std::vector<int64_t> segments;
  // What each parameterised layer reads, in forward order (nn/model.h: model_weight_reads):
  // the segments a layer's weights and gradients lie in are whole while it runs. Empty: the
  // working set is kSegmentsInFlight segments.
  std::vector<WeightRanges> layer_reads;
  int accumulation_steps = 1;  // > 1: a whole gradient accumulation buffer
  // Whether the backend gives memory back (Backend::releases_memory): where it does not (the
  // GPU, for now), sharded gradients and weights still take their whole buffers.
  bool releases = true;
  // compression.name is not none: the ring all-reduce keeps an encoded block to send beside the
  // block it receives.
  bool codec = false;
  int64_t activations = 0;            // bytes of a training step's activations, as configured
  int64_t activations_recompute = 0;  // the same with model.recompute: blocks
  bool recompute = false;             // which of the two the run takes
};

// One rank's bytes by kind.
struct RankMemory {
  int rank = 0;
  int64_t weights = 0;       // frozen weights, and the trainable ones whole or its shard
  int64_t gradients = 0;     // whole, or its shard once reduce-scattered
  int64_t optimizer = 0;     // the optimizer's state of what it updates
  int64_t buffers = 0;       // BatchNorm's statistics
  int64_t accumulation = 0;  // train.accumulation_steps > 1
  // Sharded modes: the gathered weight segments (parameters) and the whole gradient segments
  // (gradients, parameters) beyond the rank's own pieces, at the layer where they are most:
  // the segments the layer reads (or writes) and the one prefetched (or still reducing), and a
  // tied weight's gradient segments, which its two layers write at both ends of backward; and
  // the ring's scratch, where the ring runs (sharded, or with a codec): a block of the largest
  // segment received, one sent encoded.
  int64_t working_set = 0;
  int64_t activations = 0, activations_recompute = 0;
  bool recompute = false;

  // Everything, with the activations the run takes (`recompute`) or with the other figure.
  int64_t total() const { return total_with(recompute); }
  int64_t total_with(bool recomputing) const;
};

// Rank `rank`'s bytes.
RankMemory rank_memory(const MemoryInputs& in, int rank);
// The rank that holds most (the last, whose blocks are the larger ones): what must fit.
RankMemory largest_rank_memory(const MemoryInputs& in);

// "1.23 GB", "512.0 MB", "900 B": decimal units, as the table shows sizes.
std::string human_bytes(int64_t bytes);

}  // namespace dtrain
