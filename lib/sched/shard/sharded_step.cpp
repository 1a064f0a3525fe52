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

void clip_blockwise(Backend& backend, const Tensor& flat, const std::vector<int64_t>& bounds,
                    int ranks, double clip_max) {
  const double norm = std::sqrt(blockwise_squared_norm(backend, flat, bounds, ranks));
  const double coefficient = clip_coefficient(norm, clip_max);
  if (coefficient < 1.0)
    backend.scale(flat.slice(bounds.front(), {bounds.back() - bounds.front()}),
                  static_cast<float>(coefficient));
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
  if (shards_parameters(mode_)) {
    gather_ = std::make_unique<ParameterGather>(model_, allreducer_, segments_, layout_);
    return;
  }
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
}

void ShardedStep::start_ready(int64_t offset, const Tensor& gradients, size_t& started,
                              std::vector<std::future<void>>& inflight) {
  const auto& bounds = segments_.bounds();
  const size_t count = segments_.size();
  // Backward finishes the buffer from its end: segments start last to first.
  while (started < count) {
    const size_t j = count - 1 - started;
    if (bounds[j] < offset) break;
    std::function<void()> after;
    // Sharding gradients, the blocks this rank does not own are given back once reduced.
    if (shards_gradients(mode_))
      after = [this, gradients, j] {
        release_unowned(model_.backend(), gradients, segments_, layout_, j);
      };
    inflight.push_back(allreducer_.start_reduce_scatter(
        gradients.slice(bounds[j], {bounds[j + 1] - bounds[j]}), std::move(after)));
    ++started;
  }
}

void ShardedStep::step(float lr, double clip_max, const Tensor& grads) {
  Backend& backend = model_.backend();
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
  flush();  // no gather reads the pieces while they change (two steps with no forward between)
  optimizer_.begin_step();
  const Tensor& weights = model_.parameters();
  for (const ShardPiece& p : layout_.pieces())
    optimizer_.step_range(lr, weights, grads, p.offset, p.count);
  if (gather_) return gather_->refresh();
  // The weights' all-gathers in forward order: the next forward's first layers wait least.
  const auto& bounds = segments_.bounds();
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
  if (gather_) return gather_->flush();
  wait_gathered(segments_.bounds().back());
}

double ShardedStep::take_gather_wait(bool backward) {
  if (gather_) return gather_->take_wait(backward);
  return backward ? 0.0 : std::exchange(gather_wait_s_, 0.0);
}

void ShardedStep::save_parameters(SchedulerState& state) const {
  Backend& backend = model_.backend();
  const Tensor& weights = model_.parameters();
  const int64_t frozen = segments_.begin();
  // The frozen weights (whole on every rank), then this rank's pieces back to back.
  Tensor shard = backend.empty({frozen + layout_.owned()});
  if (frozen > 0) backend.copy(shard.slice(0, {frozen}), weights.slice(0, {frozen}));
  for (const ShardPiece& p : layout_.pieces())
    backend.copy(shard.slice(frozen + p.compact, {p.count}), weights.slice(p.offset, {p.count}));
  state.put("model.parameters.shard", shard, backend);
}

void ShardedStep::load_parameters(const SchedulerState& state) {
  flush();
  Backend& backend = model_.backend();
  const Tensor& weights = model_.parameters();
  const int64_t frozen = segments_.begin();
  Tensor shard = backend.empty({frozen + layout_.owned()});
  state.get("model.parameters.shard", shard, backend);
  if (frozen > 0) backend.copy(weights.slice(0, {frozen}), shard.slice(0, {frozen}));
  for (const ShardPiece& p : layout_.pieces())
    backend.copy(weights.slice(p.offset, {p.count}), shard.slice(frozen + p.compact, {p.count}));
  backend.synchronize();
  gather_->refresh();
}

std::vector<TensorSource> ShardedStep::weight_sources() {
  std::vector<TensorSource> sources;
  for (const WeightSlot& s : model_.weight_slots()) {
    const Tensor& flat = s.buffer ? model_.buffers() : model_.parameters();
    const bool gathered = !s.buffer;
    const int64_t offset = s.offset;
    sources.push_back(
        {s.name, s.shape, [this, flat, gathered, offset](float* dst, int64_t begin, int64_t count) {
           const int64_t first = offset + begin, end = first + count;
           if (gathered) gather_->need({{first, end}}, false);
           if (dst == nullptr) return;
           Backend& backend = model_.backend();
           backend.copy(Tensor::borrow(dst, {count}), flat.slice(first, {count}));
           backend.synchronize();
         }});
  }
  return sources;
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
