// Trainer: a run (run_builder.h) and its scheduler, trained epoch by epoch, evaluated by the
// scheduler, with the outputs written by rank 0. Everything that can be wrong with the user's
// input is found in the constructor, before anything is written.
#pragma once
#include <memory>
#include <string>

#include "comm/comm.h"        // Comm
#include "run/config.h"       // ExperimentConfig
#include "run/progress.h"     // Progress
#include "run/run_builder.h"  // Run, DataFiles
#include "run/run_trace.h"    // RunTrace: trace.json
#include "sched/scheduler.h"  // Scheduler

namespace dtrain {

struct RunResult {
  double test_loss = 0, test_acc = 0, train_loss = 0, train_acc = 0;
  int64_t iterations = 0;
  double train_wall_s = 0;
};

struct TrainerOptions {
  // --dry-run may stand in for missing dataset files; training may not.
  DataFiles data = DataFiles::required;
  ProgressMode progress = ProgressMode::auto_;  // --progress
};

class Trainer {
 public:
  Trainer(const ExperimentConfig& config, Comm& comm, TrainerOptions options = {});
  ~Trainer();

  // The resolved settings table and the model summary (ends with "parameters: N").
  std::string describe() const;
  // The run's notes, and what a planner decided (run.yaml).
  std::vector<std::string> notes_and_plan() const;
  // Creates output.dir and writes config.yaml and run.yaml (rank 0), then trains to the end.
  RunResult run();

  Model& model() { return *run_->model; }
  Scheduler& scheduler() { return *scheduler_; }

 private:
  Comm& comm_;
  // First: the threads of the run and the scheduler record into it until they are gone.
  std::unique_ptr<RunTrace> trace_;  // output.trace on
  std::unique_ptr<Run> run_;
  std::unique_ptr<Progress> progress_;  // rank 0 only
  bool own_updates_ = false;  // each rank updates on its own batches (gossip): counts add up
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace dtrain
