#include "sched/shard/parameter_gather.h"

#include <algorithm>  // lower_bound, upper_bound
#include <utility>    // exchange

#include "core/timer.h"  // Clock: the waits

namespace dtrain {

void release_unowned(Backend& backend, const Tensor& flat, const GradientSegments& segments,
                     const ShardLayout& layout, size_t j) {
  const int64_t begin = segments.bounds()[j], end = segments.bounds()[j + 1];
  const ShardPiece own = layout.piece_of_segment(j);
  const int64_t own_begin = own.count > 0 ? own.offset : end, own_end = own.offset + own.count;
  if (own_begin > begin) backend.release(flat.slice(begin, {own_begin - begin}));
  if (own.count > 0 && end > own_end) backend.release(flat.slice(own_end, {end - own_end}));
}

ParameterGather::ParameterGather(Model& model, GradientAllreducer& allreducer,
                                 const GradientSegments& segments, const ShardLayout& layout)
    : model_(model), allreducer_(allreducer), segments_(segments), layout_(layout) {
  held_.assign(segments_.size(), Held::whole);
  gathering_.resize(segments_.size());
  wanted_.assign(segments_.size(), 0);
  for (size_t j = 0; j < segments_.size(); ++j) give_back(j);
  model_.graph().set_weight_hook(
      [this](const Graph::WeightRanges& ranges, bool backward) { need(ranges, backward); });
}

ParameterGather::~ParameterGather() {
  model_.graph().set_weight_hook({});
  flush();
}

void ParameterGather::gather(size_t j) {
  if (held_[j] != Held::pieces) return;
  const auto& b = segments_.bounds();
  gathering_[j] = allreducer_.start_all_gather(model_.parameters().slice(b[j], {b[j + 1] - b[j]}));
  held_[j] = Held::gathering;
}

void ParameterGather::wait(size_t j, bool backward) {
  if (held_[j] != Held::gathering) return;
  const auto start = Clock::now();
  gathering_[j].get();
  wait_s_[backward ? 1 : 0] += seconds_since(start);
  held_[j] = Held::whole;
}

void ParameterGather::give_back(size_t j) {
  if (held_[j] == Held::pieces) return;
  if (held_[j] == Held::gathering) gathering_[j].get();  // its ring writes there until done
  release_unowned(model_.backend(), model_.parameters(), segments_, layout_, j);
  held_[j] = Held::pieces;
}

void ParameterGather::need(const Graph::WeightRanges& ranges, bool backward) {
  const auto& b = segments_.bounds();
  const size_t count = segments_.size();
  std::fill(wanted_.begin(), wanted_.end(), 0);
  size_t lowest = count, highest = 0;
  for (const auto& [begin, end] : ranges) {
    if (end <= b.front() || begin >= b.back()) continue;  // frozen: whole everywhere
    // Segments j with b[j] < end and b[j + 1] > begin.
    size_t j = std::upper_bound(b.begin(), b.end(), begin) - b.begin();
    j = j > 0 ? j - 1 : 0;
    for (; j < count && b[j] < end; ++j) {
      wanted_[j] = 1;
      lowest = std::min(lowest, j);
      highest = std::max(highest, j);
    }
  }
  if (lowest == count) return;
  // The next segment of the pass, gathered while this layer computes.
  if (!backward && highest + 1 < count) wanted_[highest + 1] = 2;
  if (backward && lowest > 0) wanted_[lowest - 1] = 2;
  for (size_t j = 0; j < count; ++j)
    if (wanted_[j] == 0) give_back(j);
  // Started in the pass's order: the ring serves them first come, first served.
  for (size_t j = lowest; j <= highest; ++j)
    if (wanted_[j] == 1) gather(j);
  for (size_t j = 0; j < count; ++j)
    if (wanted_[j] == 2) gather(j);
  for (size_t j = lowest; j <= highest; ++j)
    if (wanted_[j] == 1) wait(j, backward);
}

void ParameterGather::refresh() {
  for (size_t j = 0; j < segments_.size(); ++j) give_back(j);
  if (!held_.empty()) gather(0);
}

void ParameterGather::flush() {
  for (size_t j = 0; j < held_.size(); ++j)
    if (held_[j] == Held::gathering) {
      gathering_[j].get();
      held_[j] = Held::whole;
    }
}

double ParameterGather::take_wait(bool backward) {
  return std::exchange(wait_s_[backward ? 1 : 0], 0.0);
}

}  // namespace dtrain
