// PipelineRunner: runs one rank's instruction list of a pipeline schedule (pipeline_schedule.h)
// on its StageModel — the one interpreter of every schedule kind (DESIGN.md §2 decision 5).
// Minibatches take a free slot of the stage model at their forward and give it back after
// their backward; activations and gradients travel through StageChannels whose headers are
// checked. The replicas of a stage all-reduce their gradients (the `compression` codec applies)
// on a communicator of their own.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "comm/comm.h"                 // Comm
#include "comm/gradient_allreducer.h"  // GradientAllreducer: replicas' gradients
#include "comm/stage_channel.h"        // StageChannel
#include "data/loader.h"               // Batch
#include "optim/sgd.h"                 // Sgd
#include "sched/pipeline_schedule.h"   // PipelineShape, Instruction
#include "sched/stage_model.h"         // StageModel

namespace dtrain {

class PipelineRunner {
 public:
  // `stage` is this rank's stage of `shape`; `rows` the rows of every minibatch.
  // `weight_stashing`: a minibatch's backward computes with the weights its forward used (a copy
  // per slot), while steps go to the latest; without it the backward uses the latest weights
  // (the paper's ablation).
  // `vertical_sync` (needs stashing): minibatch b runs on every stage at the weight version the
  // input stage had when it admitted b (its messages carry that version, checked on arrival);
  // each stage keeps the versions still to be used.
  PipelineRunner(Comm& comm, const pipeline::PipelineShape& shape, StageModel& stage, Sgd& sgd,
                 int64_t rows, bool weight_stashing = true, const std::string& codec = "none",
                 bool vertical_sync = false);
  // Weight versions stashed at once, at most: pipeline.csv's versions_max.
  int versions_max() const { return versions_max_; }

  // Runs `instructions` (this rank's list). `batch_of(b)`: minibatch b's images (input stage)
  // and labels (output stage). Each step uses learning rate `lr`; the loss is scaled by
  // `grad_scale` (1 / rows for the batch mean); replicas of a stage step with the mean gradient
  // of their round's minibatches. `spec`: the schedule the instructions come from; gpipe and
  // 1f1b_flush sum their microbatches' gradients, each scaled by 1/m, into one step. Returns
  // the output stage's loss sum.
  double run(const std::vector<pipeline::Instruction>& instructions,
             const pipeline::ScheduleSpec& spec, const std::function<Batch(int)>& batch_of,
             float lr, float grad_scale);

 private:
  StageChannel& channel(int peer, StageMessage::Kind kind);
  int take_slot(int minibatch);
  int slot_of(int minibatch) const;
  void release(int minibatch);  // its slot and buffers are free again
  static Tensor take_buffer(std::vector<Tensor>& pool, const Shape& shape);
  StageMessage header(StageMessage::Kind kind, int minibatch, const Shape& shape) const;

  Comm& comm_;
  pipeline::PipelineShape shape_;
  StageModel& stage_;
  Sgd& sgd_;
  int64_t rows_;
  int stage_index_;                                                        // this rank's stage
  std::map<std::pair<int, int>, std::unique_ptr<StageChannel>> channels_;  // (peer, kind)
  std::vector<int> slot_of_;  // by slot: the minibatch it holds, −1 when free
  std::map<int, int> slot_by_minibatch_;
  // What arrived for each minibatch in flight (host), and the buffers free for the next.
  std::map<int, Tensor> activations_in_, gradients_in_;
  std::vector<Tensor> free_activations_, free_gradients_;
  std::vector<Tensor> input_gradient_;  // per slot: what its last backward gives back
  bool stashing_;
  std::vector<Tensor> stash_;  // per slot: the weights its minibatch's forward used
  int versions_max_ = 0;
  pipeline::ScheduleSpec spec_;
  Tensor micro_gradient_;  // a microbatch's gradient, before it joins the step's sum
  bool vertical_;
  std::vector<int> admitted_version_;  // vertical sync: per minibatch, the input stage's steps
  std::map<int, Tensor> versions_;     // vertical sync: this stage's weights by step count
  std::vector<Tensor> free_versions_;
  int steps_ = 0;
  std::set<int> forwarded_;  // this run's minibatches forwarded here
  void keep_version();       // vertical sync: the weights after steps_ steps
  bool backward_in_round_ = false;
  std::unique_ptr<Comm> stage_comm_;  // this stage's replicas
  // Declared last: its comm thread is joined before the buffers it works on go.
  std::unique_ptr<GradientAllreducer> allreducer_;  // replicated stages only
  std::map<int, Batch> batches_;                    // minibatches whose labels the loss still needs
};

}  // namespace dtrain
