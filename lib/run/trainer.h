// Trainer: a run (run_builder.h) and its scheduler, trained epoch by epoch, evaluated by the
// scheduler, with the outputs written by rank 0. Everything that can be wrong with the user's
// input is found in the constructor, before anything is written.
#pragma once
#include <memory>
#include <string>

#include "comm/comm.h"        // Comm
#include "comm/stop_vote.h"   // StopVote
#include "run/checkpoint.h"   // CheckpointStore
#include "run/config.h"       // ExperimentConfig
#include "run/metrics.h"      // MetricsWriter
#include "run/output_dir.h"   // OutputMode
#include "run/progress.h"     // Progress
#include "run/run_builder.h"  // Run, DataFiles
#include "run/run_record.h"   // RunYamlFile: run.yaml's status
#include "run/run_trace.h"    // RunTrace: trace.json
#include "sched/scheduler.h"  // Scheduler

namespace dtrain {

// A run stopped by SIGINT or SIGTERM after its checkpoint and CSVs: main exits 128 + signal.
struct Stopped {
  int signal = 0;
  std::string message;  // where it stopped, and how to continue
};

struct RunResult {
  double test_loss = 0, test_acc = 0, train_loss = 0, train_acc = 0;
  int64_t iterations = 0;
  double train_wall_s = 0;
};

struct TrainerOptions {
  // --dry-run may stand in for missing dataset files; training may not.
  DataFiles data = DataFiles::required;
  ProgressMode progress = ProgressMode::auto_;  // --progress
  // What happens to results already in output.dir: refused, replaced (--overwrite) or continued
  // from the newest checkpoint (--resume). A dry run writes nothing and checks nothing.
  OutputMode output = OutputMode::fresh;
  // cluster.stragglers' ranks against the comm's; false for a one-process --dry-run, which
  // checks them for --ranks N (rank_checks.h) or notes that it did not.
  bool check_ranks = true;
  // --dry-run: the model is built only where it fits this host (its memory table is shown
  // either way).
  bool dry_run = false;
  // The ranks the memory table and the start-up check are for, all on this host (--dry-run
  // --ranks N in one process); 0: the comm's ranks, Comm::local_size of them on this host.
  int memory_ranks = 0;
  // Whether memory_ranks is the job's (--ranks N) or an assumption (a dry run without --ranks).
  bool memory_ranks_known = true;
};

class Trainer {
 public:
  Trainer(const ExperimentConfig& config, Comm& comm, TrainerOptions options = {});
  ~Trainer();

  // The resolved settings table, the memory table and the model summary (ends with
  // "parameters: N").
  std::string describe() const;
  // False for a dry run whose model was too large to build on this host (describe() says so):
  // nothing but describe() may be called.
  bool built() const { return run_->model != nullptr; }
  // The run's notes, and what a planner decided (run.yaml).
  std::vector<std::string> notes_and_plan() const;
  // What the config's `auto` keys settled on (the device, the GPU gradients' transport, the
  // algorithm's own), as (key path, value) to paste back to repeat the run (run.yaml).
  std::vector<std::pair<std::string, std::string>> resolved_settings() const;
  // The settings without effect on this job's ranks, for rank 0 to warn about (rank_checks.h).
  const std::vector<std::string>& no_effect() const { return run_->no_effect; }
  // Creates output.dir and writes config.yaml and run.yaml (rank 0), then trains to the end.
  RunResult run();

  // run.yaml's status block: run() ends it as completed or stopped; main, as failed.
  std::shared_ptr<RunYamlFile> run_yaml() const { return run_yaml_; }

  Model& model() { return *run_->model; }
  Scheduler& scheduler() { return *scheduler_; }

 private:
  // Where training continues, and what the epoch in progress has done so far.
  struct Position {
    CheckpointPoint point;    // the epoch, and its iterations done (the scheduler's units)
    EpochStats epoch_so_far;  // this rank's, of point.epoch before point.iteration
    int64_t updates = 0;      // accuracy.csv's iteration: the epochs' before point.epoch
  };
  // How the training of an epoch ended.
  struct EpochEnd {
    bool budget_done = false;  // train.max_iterations reached
    bool stopping = false;     // the ranks agreed to stop (a signal)
    // The epoch's last part ended at a multiple of train.eval_every_iterations: its end is
    // evaluated whether eval_every_epochs asks or not.
    bool eval_due = false;
  };
  // Loads the newest valid checkpoint (--resume) into the scheduler, `result` and the returned
  // position; `accuracy_csv` and `timing_csv` get the rows written so far.
  Position resume(RunResult& result, std::string& accuracy_csv, std::string& timing_csv);
  // Rank 0, on resume: what a train.epochs other than the checkpoint's run had (`saved_epochs`)
  // does to the learning-rate schedule at `at` (the log's one line).
  void note_schedule(int saved_epochs, const CheckpointPoint& at) const;
  // run()'s steps, in order.
  // Rank 0: output.dir (what --overwrite replaces goes now), config.yaml, run.yaml and the
  // metrics writer, which continues the rows of a resumed run.
  void write_run_files(const std::vector<std::string>& hosts, const std::vector<int>& local_ranks,
                       const std::string& accuracy_so_far, const std::string& timing_so_far);
  // Trains the epoch of `at` from its iteration on, in parts that end where a checkpoint is due
  // (checkpoint.every_iterations, written here) or train.max_iterations ends; `at` and
  // `result.iterations` advance.
  EpochEnd train_epoch(Position& at, RunResult& result, int64_t epoch_length);
  // The epoch of `at` is over: timing.csv's rows, the training loss, the evaluation when due
  // (`last`: the run's last epoch) and the log line; `at` moves to the next epoch's start.
  void finish_epoch(Position& at, RunResult& result, bool last, bool eval_due = false);
  // train.eval_every_iterations came within the epoch of `at`: an evaluation and its row of
  // accuracy.csv, with the training loss of the epoch's iterations so far.
  void evaluate_within(const Position& at, RunResult& result);
  // Evaluates the scheduler's model and writes accuracy.csv's row of `epoch`.
  void evaluate(int epoch, int64_t updates, const EpochStats& mine, double samples,
                RunResult& result, int64_t within = 0);
  // Training is over: flush, the scheduler's own result files, model.safetensors, trace.json,
  // the last line.
  void finish(const RunResult& result);
  // Writes the checkpoint of `at` (a collective): the one place a checkpoint is written.
  void checkpoint(const Position& at, const RunResult& result);
  // Every rank's peak resident (and device) memory into run.yaml's status (a collective).
  void record_peak_memory();
  // The stop at `at` (a signal), for main; `saved`: a checkpoint of `at` was written.
  Stopped stopped(const CheckpointPoint& at, bool saved) const;

  Comm& comm_;
  TrainerOptions options_;
  std::unique_ptr<CheckpointStore> checkpoints_;  // checkpoint: set, or --resume
  std::unique_ptr<StopVote> stop_;                // a signal's stop, agreed by the ranks
  // First: the threads of the run and the scheduler record into it until they are gone.
  std::unique_ptr<RunTrace> trace_;  // output.trace on
  std::unique_ptr<Run> run_;
  std::unique_ptr<Progress> progress_;      // rank 0 only
  std::unique_ptr<MetricsWriter> metrics_;  // rank 0 only, once run() has started
  std::unique_ptr<Scheduler> scheduler_;
  std::shared_ptr<RunYamlFile> run_yaml_;  // every rank's (whichever ends the run writes)
  // Tokens in a sample of a language model (its log lines show tokens/s and perplexity); 0.
  int64_t tokens_per_sample_ = 0;
  bool gradients_on_nccl_ = false;  // cluster.comm: auto chose NCCL (found when run() starts)
};

}  // namespace dtrain
