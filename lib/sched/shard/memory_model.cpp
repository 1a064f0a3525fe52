#include "sched/shard/memory_model.h"

#include <fmt/format.h>

#include <algorithm>  // max

#include "core/error.h"
#include "sched/shard/shard_layout.h"

namespace dtrain {

namespace {

constexpr int64_t kFloat = 4;  // every buffer of the model's state is f32

// The most elements kSegmentsInFlight consecutive segments hold (all of them when fewer).
int64_t largest_in_flight(const std::vector<int64_t>& bounds) {
  const int64_t segments = static_cast<int64_t>(bounds.size()) - 1;
  if (segments <= 0) return 0;
  const int64_t window = std::min<int64_t>(kSegmentsInFlight, segments);
  int64_t most = 0;
  for (int64_t j = 0; j + window <= segments; ++j)
    most = std::max(most, bounds[j + window] - bounds[j]);
  return most;
}

}  // namespace

int64_t RankMemory::total_with(bool recomputing) const {
  return weights + gradients + optimizer + buffers + accumulation + working_set +
         (recomputing ? activations_recompute : activations);
}

RankMemory rank_memory(const MemoryInputs& in, int rank) {
  const int64_t frozen = in.trainable_offset, trainable = in.parameters - in.trainable_offset;
  DTRAIN_CHECK(frozen >= 0 && trainable >= 0) << "trainable offset " << in.trainable_offset
                                              << " outside the " << in.parameters << " parameters";
  // The elements this rank keeps of each sharded kind: its blocks, or the whole range.
  const int64_t owned =
      in.shard == ShardMode::none ? trainable : ShardLayout(in.segments, rank, in.ranks).owned();
  const int64_t in_flight = largest_in_flight(in.segments);
  RankMemory m;
  m.rank = rank;
  m.weights = kFloat * (frozen + (shards_parameters(in.shard) ? owned : trainable));
  m.gradients = kFloat * (shards_gradients(in.shard) ? owned : trainable);
  m.optimizer = kFloat * in.optimizer_states * (shards_optimizer(in.shard) ? owned : trainable);
  m.buffers = kFloat * in.buffer_elements;
  m.accumulation = in.accumulation_steps > 1 ? kFloat * trainable : 0;
  m.working_set = kFloat * ((shards_parameters(in.shard) ? in_flight : 0) +
                            (shards_gradients(in.shard) ? in_flight : 0));
  if (in.ranks > 1 && (in.shard != ShardMode::none || in.codec)) {
    int64_t largest = 0;
    for (size_t j = 0; j + 1 < in.segments.size(); ++j)
      largest = std::max(largest, in.segments[j + 1] - in.segments[j]);
    const int64_t block = (largest + in.ranks - 1) / in.ranks;
    m.working_set += kFloat * block * (in.codec ? 2 : 1);  // a codec's encoding is smaller: bound
  }
  m.activations = in.activations;
  m.activations_recompute = in.activations_recompute;
  m.recompute = in.recompute;
  return m;
}

RankMemory largest_rank_memory(const MemoryInputs& in) {
  RankMemory most = rank_memory(in, 0);
  if (in.shard == ShardMode::none) return most;  // every rank holds the same
  for (int r = 1; r < in.ranks; ++r) {
    RankMemory m = rank_memory(in, r);
    if (m.total() > most.total()) most = m;
  }
  return most;
}

std::string human_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= 1000LL * 1000 * 1000) return fmt::format("{:.2f} GB", b / 1e9);
  if (bytes >= 1000LL * 1000) return fmt::format("{:.1f} MB", b / 1e6);
  if (bytes >= 1000) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", bytes);
}

}  // namespace dtrain
