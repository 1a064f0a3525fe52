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

// The segments overlapping `ranges` (none for ranges outside the segments: frozen).
std::vector<char> segments_of(const std::vector<int64_t>& bounds, const WeightRanges& ranges) {
  const size_t count = bounds.size() - 1;
  std::vector<char> in(count, 0);
  for (const auto& [begin, end] : ranges)
    for (size_t j = 0; j < count; ++j)
      if (bounds[j] < end && bounds[j + 1] > begin) in[j] = 1;
  return in;
}

// The most elements outside the rank's pieces that the segments held at once take: per layer,
// the segments it uses, the next one (`ahead`: forward's prefetch, or the gradient segment still
// reducing) and the previous one (backward's prefetch), and `pinned` throughout.
int64_t largest_held(const MemoryInputs& in, const ShardLayout& layout,
                     const std::vector<char>& pinned, bool both_ways) {
  const auto& b = in.segments;
  const size_t count = b.size() - 1;
  auto unowned = [&](size_t j) { return b[j + 1] - b[j] - layout.piece_of_segment(j).count; };
  int64_t most = 0;
  for (const WeightRanges& reads : in.layer_reads) {
    std::vector<char> held = segments_of(b, reads);
    size_t lowest = count, highest = 0;
    for (size_t j = 0; j < count; ++j)
      if (held[j]) lowest = std::min(lowest, j), highest = std::max(highest, j);
    if (lowest == count) continue;
    for (const bool forward : {true, false}) {
      if (!forward && !both_ways) continue;
      std::vector<char> now = held;
      if (forward && highest + 1 < count) now[highest + 1] = 1;
      if (!forward && lowest > 0) now[lowest - 1] = 1;
      int64_t sum = 0;
      for (size_t j = 0; j < count; ++j)
        if (now[j] || pinned[j]) sum += unowned(j);
      most = std::max(most, sum);
    }
  }
  return most;
}

// The segments of the weights two layers read (a tied embedding and head).
std::vector<char> tied_segments(const MemoryInputs& in) {
  std::vector<char> pinned(in.segments.size() - 1, 0);
  for (size_t a = 0; a < in.layer_reads.size(); ++a)
    for (size_t c = a + 1; c < in.layer_reads.size(); ++c)
      for (const auto& r : in.layer_reads[a])
        for (const auto& s : in.layer_reads[c])
          if (r == s) {
            const std::vector<char> segs = segments_of(in.segments, {r});
            for (size_t j = 0; j < segs.size(); ++j) pinned[j] |= segs[j];
          }
  return pinned;
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
  const bool weights_sharded = shards_parameters(in.shard) && in.releases;
  const bool gradients_sharded = shards_gradients(in.shard) && in.releases;
  m.weights = kFloat * (frozen + (weights_sharded ? owned : trainable));
  m.gradients = kFloat * (gradients_sharded ? owned : trainable);
  m.optimizer = kFloat * in.optimizer_states * (shards_optimizer(in.shard) ? owned : trainable);
  m.buffers = kFloat * in.buffer_elements;
  m.accumulation = in.accumulation_steps > 1 ? kFloat * trainable : 0;
  if (in.layer_reads.empty() || in.segments.size() < 2 || in.shard == ShardMode::none) {
    m.working_set =
        kFloat * ((weights_sharded ? in_flight : 0) + (gradients_sharded ? in_flight : 0));
  } else {
    const ShardLayout layout(in.segments, rank, in.ranks);
    const std::vector<char> none(in.segments.size() - 1, 0);
    if (weights_sharded) m.working_set += kFloat * largest_held(in, layout, none, true);
    if (gradients_sharded)
      m.working_set += kFloat * largest_held(in, layout, tied_segments(in), false);
  }
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
