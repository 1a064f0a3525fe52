#include "sched/pipeline/weight_versions.h"

#include <algorithm>  // max, min

#include "core/error.h"

namespace dtrain::pipeline {

WeightVersions::WeightVersions(StageModel& stage, const PipelineShape& shape, int rank,
                               bool stashing, bool vertical_sync)
    : stage_(stage),
      shape_(shape),
      rank_(rank),
      stage_index_(shape.stage_of(rank)),
      stashing_(stashing),
      vertical_(vertical_sync),
      on_host_(stage.backend().device() == Device::cpu) {
  DTRAIN_INPUT_CHECK(!vertical_ || stashing_)
      << "algorithm.vertical_sync: needs weight_stashing (the versions are stashed weights)";
  // The stash ring, allocated once: one version per slot, never more than in flight. A stage
  // with one minibatch in flight needs none: no step comes between its forward and backward.
  const int slots = stage.slots();
  if (stashing_ && (slots > 1 || vertical_))
    for (int s = 0; s < slots; ++s)
      stash_.push_back(stage.backend().zeros({stage.num_parameters()}));
}

void WeightVersions::start_run(const ScheduleSpec& spec) {
  spec_ = spec;
  forwarded_.clear();
  if (!vertical_) return;
  // When the input stage admits each minibatch: the steps before its forward, from the input
  // stage's own lists (the schedule is data).
  const auto all = build_schedule(shape_, spec);
  admitted_version_.assign(static_cast<size_t>(spec.minibatches * spec.microbatches), 0);
  for (int r = 0; r < shape_.replicas[0]; ++r) {
    int steps = 0;
    for (const Instruction& in : all[static_cast<size_t>(r)]) {
      if (in.op == Op::step) ++steps;
      // The version as iterations incorporated: stages whose replica counts differ step at
      // different rates (1f1b: a step per round of R_s minibatches).
      if (in.op == Op::forward)
        admitted_version_[static_cast<size_t>(in.minibatch)] =
            steps * spec.iterations_per_step(shape_.replicas[0]);
    }
  }
  keep_version(0);
}

void WeightVersions::end_early(int units) {
  if (vertical_ && admitted_version_.size() > static_cast<size_t>(units))
    admitted_version_.resize(static_cast<size_t>(units));
}

void WeightVersions::forward(int minibatch, int slot, int slots_in_use) {
  if (stashing_ && !stash_.empty()) {
    // This minibatch's version — the latest weights now, or with vertical sync the version the
    // input stage admitted it at — kept until its backward.
    const Tensor& version = vertical_ ? versions_.at(version_step(minibatch)) : stage_.parameters();
    stage_.backend().copy(stash_[static_cast<size_t>(slot)], version);
    stage_.set_slot_parameters(slot, stash_[static_cast<size_t>(slot)]);
    versions_max_ = std::max(versions_max_, slots_in_use);
  } else if (stashing_) {
    versions_max_ = 1;  // the latest weights are the forward's version at its backward
  }
  forwarded_.insert(minibatch);
}

void WeightVersions::stepped(int steps) {
  if (vertical_) keep_version(steps);
}

int WeightVersions::version_step(int minibatch) const {
  // This stage's latest weights that incorporate no more iterations than the admitted version.
  const int admitted = admitted_version_.at(static_cast<size_t>(minibatch));
  return admitted / spec_.iterations_per_step(shape_.replicas[static_cast<size_t>(stage_index_)]);
}

void WeightVersions::keep_version(int steps) {
  // A pooled buffer (all have the parameters' size), or a new one where the stage computes.
  Tensor t;
  const Shape& shape = stage_.parameters().shape();
  if (!free_versions_.empty()) {
    t = free_versions_.front();
    free_versions_.erase(free_versions_.begin());
  } else {
    t = on_host_ ? Tensor::empty(shape, DType::f32, stage_.backend().host_allocator())
                 : stage_.backend().empty(shape, DType::f32);
  }
  stage_.backend().copy(t, stage_.parameters());
  versions_[steps] = t;
  int oldest_needed = steps;
  for (size_t b = 0; b < admitted_version_.size(); ++b)
    if (shape_.rank_of(stage_index_, static_cast<int>(b)) == rank_ &&
        !forwarded_.count(static_cast<int>(b)))
      oldest_needed = std::min(oldest_needed, version_step(static_cast<int>(b)));
  for (auto it = versions_.begin(); it != versions_.end() && it->first < oldest_needed;) {
    free_versions_.push_back(it->second);
    it = versions_.erase(it);
  }
}

}  // namespace dtrain::pipeline
