#include "sched/shard/sharded_step.h"

#include <algorithm>  // upper_bound
#include <cmath>      // sqrt
#include <sstream>    // the layout as text

#include "core/error.h"
#include "core/timer.h"  // Clock: the forward's waits
#include "optim/clip.h"  // clip_coefficient

namespace dtrain {

namespace {

double squared_norm_of(Backend& backend, const Tensor& flat,
                       const std::vector<ShardPiece>& pieces) {
  double sum = 0;
  for (const ShardPiece& p : pieces) {
    const Tensor part = flat.slice(p.offset, {p.count});
    sum += backend.dot(part, part);
  }
  return sum;
}

// "offset count;offset count;..." of the pieces, with the mode and the ranks.
std::string layout_text(ShardMode mode, const Comm& comm, const ShardLayout& layout) {
  std::ostringstream out;
  out << shard_word(mode) << " rank " << comm.rank() << " of " << comm.size() << ":";
  for (const ShardPiece& p : layout.pieces()) out << " " << p.offset << "+" << p.count;
  return out.str();
}

}  // namespace

double blockwise_squared_norm(Backend& backend, const Tensor& flat,
                              const std::vector<int64_t>& bounds, int ranks) {
  double total = 0;
  for (int r = 0; r < ranks; ++r)
    total += squared_norm_of(backend, flat, ShardLayout(bounds, r, ranks).pieces());
  return total;
}

ShardedStep::ShardedStep(ShardMode mode, Model& model, Optimizer& optimizer, Comm& comm,
                         GradientAllreducer& allreducer, const GradientSegments& segments)
    : mode_(mode),
      model_(model),
      optimizer_(optimizer),
      comm_(comm),
      allreducer_(allreducer),
      segments_(segments),
      layout_(segments.bounds(), comm.rank(), comm.size()) {
  DTRAIN_CHECK(mode != ShardMode::none) << "a sharded step without a shard mode";
  optimizer_.shard(layout_.pieces());
  gathering_.resize(segments_.size());
  // Each layer with weights of its own waits for theirs; a tied head reads its lender's, which
  // the lender's own wait covered earlier in the same forward.
  for (const LayerRange& range : model_.layer_ranges()) {
    if (range.count == 0 || range.offset + range.count <= segments_.begin()) continue;
    const int64_t end = range.offset + range.count;
    model_.set_forward_hook(range.name, [this, end] { wait_gathered(end); });
    hooked_.push_back(range.name);
  }
}

ShardedStep::~ShardedStep() {
  for (const std::string& name : hooked_) model_.set_forward_hook(name, {});
  for (auto& f : gathering_)
    if (f.valid()) f.wait();
  for (auto& f : reducing_)
    if (f.valid()) f.wait();
}

void ShardedStep::start_ready(int64_t offset) {
  const auto& bounds = segments_.bounds();
  const size_t count = segments_.size();
  const Tensor& grads = model_.gradients();
  // Backward finishes the buffer from its end: segments start last to first.
  while (started_ < count) {
    const size_t j = count - 1 - started_;
    if (bounds[j] < offset) break;
    reducing_.push_back(
        allreducer_.start_reduce_scatter(grads.slice(bounds[j], {bounds[j + 1] - bounds[j]})));
    ++started_;
  }
}

void ShardedStep::finish_reduce() {
  start_ready(segments_.begin());  // whatever backward has not started (all of it with one)
  for (auto& f : reducing_) f.get();
  reducing_.clear();
}

void ShardedStep::step(float lr, double clip_max) {
  Backend& backend = model_.backend();
  const Tensor& grads = model_.gradients();
  if (clip_max > 0) {
    // Every rank's sum of squares in its slot, zeros elsewhere: the all-reduce adds each slot
    // to zeros only (exact in any order), and every rank sums the slots in rank order.
    std::vector<double> slots(comm_.size(), 0.0);
    slots[comm_.rank()] = squared_norm_of(backend, grads, layout_.pieces());
    comm_.allreduce_sum(slots);
    double total = 0;
    for (double s : slots) total += s;
    const double coefficient = clip_coefficient(std::sqrt(total), clip_max);
    if (coefficient < 1.0)
      for (const ShardPiece& p : layout_.pieces())
        backend.scale(grads.slice(p.offset, {p.count}), static_cast<float>(coefficient));
  }
  optimizer_.begin_step();
  for (const ShardPiece& p : layout_.pieces()) optimizer_.step_range(lr, p.offset, p.count);
  // The weights' all-gathers in forward order: the next forward's first layers wait least.
  const auto& bounds = segments_.bounds();
  const Tensor& weights = model_.parameters();
  for (size_t j = 0; j < segments_.size(); ++j)
    gathering_[j] =
        allreducer_.start_all_gather(weights.slice(bounds[j], {bounds[j + 1] - bounds[j]}));
}

void ShardedStep::wait_gathered(int64_t end) {
  const auto& bounds = segments_.bounds();
  // Segments j with bounds[j] < end overlap [.., end).
  const size_t last = std::lower_bound(bounds.begin(), bounds.end() - 1, end) - bounds.begin();
  for (size_t j = 0; j < last && j < gathering_.size(); ++j) {
    if (!gathering_[j].valid()) continue;
    const auto start = Clock::now();
    gathering_[j].get();
    gather_wait_s_ += seconds_since(start);
  }
}

void ShardedStep::flush() {
  wait_gathered(segments_.bounds().back());
}

void ShardedStep::save(SchedulerState& state) const {
  state.set_text("shard.layout", layout_text(mode_, comm_, layout_));
}

void ShardedStep::check_layout(const SchedulerState& state) const {
  const std::string mine = layout_text(mode_, comm_, layout_);
  DTRAIN_INPUT_CHECK(state.has("shard.layout"))
      << "the checkpoint was written without algorithm.shard; this run shards ("
      << shard_word(mode_) << "): resume it with the algorithm.shard it was written with";
  DTRAIN_INPUT_CHECK(state.text("shard.layout") == mine)
      << "the checkpoint's shard (" << state.text("shard.layout").substr(0, 80)
      << ") is not this run's (" << mine.substr(0, 80)
      << "): resume with the algorithm.shard and algorithm.segments it was written with";
}

std::string ShardedStep::describe() const {
  const int64_t whole = model_.num_parameters() - segments_.begin();
  std::ostringstream out;
  out << "ring reduce-scatter + all-gather (shard: " << shard_word(mode_) << "; this rank owns "
      << layout_.owned() << " of " << whole << " parameters)";
  return out.str();
}

}  // namespace dtrain
