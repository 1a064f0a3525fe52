// PipeDream (Harlap et al., 2018, §3.3–3.5): the model cut into stages (`stages:` names the first
// layer of stage 2, 3, ...), each stage on `replicas[s]` ranks, minibatches streaming through
// with 1F1B (or GPipe / PipeDream-Flush) from a schedule built as data and run by one
// interpreter (pipeline_schedule.h, pipeline_runner.h). Each rank builds only its stage
// (StageModel) and an optimizer for it; the input stage reads the minibatches' images, the output
// stage their labels, both from the same deterministic shuffle by minibatch id, and the messages
// in between carry checked headers. The replicas of a stage all-reduce their gradients among
// themselves (the `compression` codec applies) — the only all-reduce: the paper's 90–95 % less
// communication than data parallelism comes from here.
//
// Minibatches per epoch: the training set's ⌊N / (u·L)⌋·L units of u rows (u = the minibatch
// for 1f1b, the microbatch for gpipe and 1f1b_flush), L = the lcm of the input and output
// stages' replicas (and of the microbatches per step), so that every replica's loader slice has
// whole rounds; the last < L units of an epoch are dropped, like drop_last. The pipeline drains at
// the end of every epoch, so that evaluation (forward passes along replica 0 of each stage) and
// checkpoints see settled weights.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/kinds.h"                // WordOr
#include "optim/optimizer.h"             // Optimizer: the stage's (SGD or AdamW)
#include "sched/algorithm.h"             // AlgorithmEntry
#include "sched/pipeline/runner.h"       // PipelineRunner
#include "sched/pipeline/schedule.h"     // PipelineShape, ScheduleSpec
#include "sched/pipeline/stage_model.h"  // StageModel
#include "sched/scheduler.h"             // Scheduler

namespace dtrain {

// PipeDream's keys (docs/architecture.md §3).
struct PipedreamOptions {
  std::string schedule = "1f1b";  // 1f1b | gpipe | 1f1b_flush
  config::WordOr<std::vector<std::string>> stages =
      config::WordOr<std::vector<std::string>>::named("auto");
  config::WordOr<std::vector<int>> replicas = config::WordOr<std::vector<int>>::named("auto");
  config::WordOr<int> in_flight = config::WordOr<int>::named("auto");
  int microbatches = 1;
  bool weight_stashing = true;
  bool vertical_sync = false;
  std::string partition_cost =
      "paper";  // paper | runtime (docs/algorithms.md says why paper is the default)
};

// A pipedream configuration resolved for a job of `world` ranks: the stages' first layers, the
// replicas per stage, the schedule and the rows of one unit (minibatch or microbatch).
// InputError naming the key for what the job cannot run.
struct PipelineLayout {
  std::vector<std::string> starts;  // first layer of stage 2, 3, ...
  pipeline::PipelineShape shape;
  pipeline::ScheduleSpec spec;  // kind, microbatches, in_flight (minibatches set per epoch)
  int64_t unit_rows = 0;
};
PipelineLayout pipeline_layout(const PipedreamOptions& options, int world, int64_t batch_size);

AlgorithmEntry pipedream_algorithm();

class PipedreamScheduler : public Scheduler {
 public:
  PipedreamScheduler(SchedulerContext ctx, const PipedreamOptions& options);
  ~PipedreamScheduler() override;
  std::string name() const override { return "pipedream"; }
  std::string describe() const override;
  EpochStats run_epoch(Loader& loader, const EpochPart& part) override;
  EvalResult evaluate(Loader& test) override;
  int64_t progress_iterations(int64_t loader_batches) const override;
  int64_t epoch_iterations(int64_t loader_batches) const override;
  void seek(Loader& loader, int epoch, int64_t first) override;
  std::vector<std::pair<std::string, std::string>> own_results() override;
  void save(SchedulerState& state) override;
  void load(const SchedulerState& state) override;
  // The stages' weights gathered on rank 0 (replica 0's of each stage, which evaluate() uses).
  NamedTensors weights() override;

 private:
  // Units of the epoch (at most `max_iterations` minibatches or steps when > 0).
  int units_per_epoch(int64_t max_iterations) const;
  // Units of one iteration: 1 (1f1b: a minibatch) or the microbatches of a step.
  int64_t units_per_iteration() const;

  PipedreamOptions options_;
  PipelineLayout layout_;
  std::vector<StageSlice> stages_;  // every stage's layers (pipeline.csv, describe)
  int stage_ = 0, replica_ = 0;     // this rank's
  std::unique_ptr<StageModel> model_;
  std::unique_ptr<Comm> inputs_;          // the input stage's replicas (and the others apart)
  std::unique_ptr<StopVote> input_vote_;  // input stage, 1f1b: whether a signal ends a run
  int32_t notice_signal_ = 0;             // other stages: the signal passed on to rank 0
  std::unique_ptr<CommRequest> stop_notice_;
  std::unique_ptr<Optimizer> optimizer_;    // over the stage's parameters
  uint64_t minibatches_done_ = 0;           // over all epochs: dropout masks never repeat
  std::unique_ptr<PipelineRunner> runner_;  // last: its comm thread goes first
};

}  // namespace dtrain
