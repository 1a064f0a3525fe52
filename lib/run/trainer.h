// Trainer: turns a validated ExperimentConfig into a run — backend, datasets, model, loaders,
// optimizer, scheduler — then trains, evaluates and writes the outputs. Everything that can be
// wrong with the user's input is found in the constructor, before anything is written.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"  // Backend
#include "comm/comm.h"        // Comm
#include "data/loader.h"      // Dataset, Loader
#include "nn/model.h"         // Model
#include "optim/sgd.h"        // Sgd, LrSchedule
#include "run/config.h"       // ExperimentConfig
#include "run/progress.h"     // Progress
#include "sched/scheduler.h"  // Scheduler

namespace dtrain {

struct RunResult {
  double test_loss = 0, test_acc = 0, train_loss = 0, train_acc = 0;
  int64_t iterations = 0;
  double train_wall_s = 0;
};

class Trainer {
 public:
  Trainer(const ExperimentConfig& config, Comm& comm);
  ~Trainer();

  // The resolved settings table and the model summary (ends with "parameters: N").
  std::string describe() const;
  // Creates output.dir and writes config.yaml (rank 0), then trains to the end.
  RunResult run();

  Model& model() { return *model_; }

 private:
  struct Eval {
    double loss = 0, acc = 0;
  };
  Eval evaluate();

  ExperimentConfig config_;
  Comm& comm_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Dataset> train_set_, test_set_;
  std::unique_ptr<Loader> train_loader_, test_loader_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Sgd> optimizer_;
  std::unique_ptr<Progress> progress_;  // rank 0 only
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace dtrain
