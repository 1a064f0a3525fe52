// WeightVersions: which weights a pipeline stage's minibatch computes with (PipeDream, Harlap et
// al. 2018, §3.4) — the part of the schedule's interpreter (runner.h) that keeps them.
//   weight stashing  a minibatch's backward uses the weights its forward used: a copy per slot
//                    (a minibatch in flight), while steps go to the latest weights; without it
//                    the backward uses the latest (the paper's ablation).
//   vertical sync    minibatch b runs on every stage at the weight version the input stage had
//                    when it admitted b; each stage keeps the versions still to be used, by
//                    step count (needs stashing: the versions are stashed weights).
#pragma once
#include <map>
#include <set>
#include <vector>

#include "core/tensor.h"
#include "sched/pipeline/schedule.h"     // PipelineShape, ScheduleSpec
#include "sched/pipeline/stage_model.h"  // StageModel

namespace dtrain::pipeline {

class WeightVersions {
 public:
  // `stage`: this stage, the one `rank` runs in `shape`. InputError for vertical sync without
  // stashing.
  WeightVersions(StageModel& stage, const PipelineShape& shape, int rank, bool stashing,
                 bool vertical_sync);

  // A run of the schedule `spec` starts (this stage has taken no step of it yet).
  void start_run(const ScheduleSpec& spec);
  // The run now ends after `units` units (an early end): later ones need no version.
  void end_early(int units);
  // Minibatch (unit) `minibatch` is forwarded in `slot`, with `slots_in_use` slots holding a
  // minibatch: the slot computes with its version until its backward.
  void forward(int minibatch, int slot, int slots_in_use);
  // The stage took its `steps`-th step of the run.
  void stepped(int steps);

  // The version minibatch b's messages carry, checked on arrival: with vertical sync the one the
  // input stage admitted it at, else 0.
  int message_version(int minibatch) const {
    return vertical_ ? admitted_version_.at(static_cast<size_t>(minibatch)) : 0;
  }
  // Weight versions stashed at once, at most: pipeline.csv's versions_max.
  int versions_max() const { return versions_max_; }

 private:
  // Vertical sync: the weights after `steps` steps are a version; versions no later minibatch
  // will use go back to the pool.
  void keep_version(int steps);
  // Vertical sync: this stage's steps for the version minibatch b was admitted at.
  int version_step(int minibatch) const;

  StageModel& stage_;
  PipelineShape shape_;
  int rank_, stage_index_;
  bool stashing_, vertical_;
  bool on_host_;               // the stage computes on the host: versions in host memory
  std::vector<Tensor> stash_;  // per slot: the weights its minibatch's forward used
  int versions_max_ = 0;
  ScheduleSpec spec_;
  // Vertical sync: per minibatch, the iterations the input stage's weights incorporated when it
  // admitted it (1f1b: its steps × its replicas; flush schedules: its steps).
  std::vector<int> admitted_version_;
  std::map<int, Tensor> versions_;  // this stage's weights by step count
  std::vector<Tensor> free_versions_;
  std::set<int> forwarded_;  // this run's minibatches forwarded here
};

}  // namespace dtrain::pipeline
