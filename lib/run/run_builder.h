// The one place a run is assembled from a validated experiment — backend, datasets, loaders
// (with the backend's allocator and device), model, optimizer, LR schedule, the job's
// communicator and the scheduler — for training, `dtrain plan` and the tests alike, so that
// what is profiled, tested and trained is the same thing (docs/architecture.md, decision 8).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"  // Backend
#include "comm/comm.h"        // Comm
#include "data/loader.h"      // Dataset, Loader, LoaderOptions
#include "nn/model.h"         // Model, ModelInput
#include "nn/safetensors.h"   // NamedTensors: model.init_from
#include "optim/lr_schedule.h"
#include "optim/sgd.h"
#include "run/config.h"        // ExperimentConfig
#include "run/memory_check.h"  // MemoryPlace, MemoryReport: the start-up memory check
#include "sched/scheduler.h"   // Scheduler, IterationReport

namespace dtrain {

// Where this run sits in the job: its rank among `world` data-parallel ranks (for `dtrain
// plan`, the ranks predicted for) and on its node.
struct RunPlace {
  int rank = 0, world = 1, local_rank = 0;
  bool announce = true;  // `cluster.device: auto` says on stderr what it picked
  // How the ranks agree on a planner's decision (a broadcast of rank 0's text); unset: this
  // process decides alone (dtrain plan, --dry-run).
  std::function<std::string(const std::string&)> agree{};
  bool plan = true;  // let a planner fill in `auto` keys (not for a one-process --dry-run)
  // The run starts afresh: model.init_from's weights replace the initialisation. False for a
  // resumed run, whose checkpoint has the weights (the file is not read).
  bool fresh = true;
  // The start-up memory check (memory_check.h) for this job, before the model is allocated:
  // training and --dry-run; unset: none (dtrain plan, the tests).
  std::optional<MemoryPlace> memory{};
  // A --dry-run: the model is built only where this process's build of it fits this host.
  bool dry_run = false;
};

// Training needs the dataset's files; --dry-run and `dtrain plan` may do with a stand-in of the
// same shape when they are missing (and say so).
enum class DataFiles { required, stand_in_when_missing };

struct Run {
  ExperimentConfig config;
  RunPlace place;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Dataset> train_set, test_set;
  LoaderOptions train_loading, test_loading;
  std::unique_ptr<Loader> train_loader, test_loader;
  // The build batch is the larger of the train and test local batches; with
  // train.accumulation_steps N > 1, the train micro-batch (local batch / N).
  ModelInput model_input;
  std::unique_ptr<Model> model;  // initialised, or from model.init_from
  // model.init_from's tensors, kept for a model-parallel scheduler's parts (null otherwise).
  std::shared_ptr<const NamedTensors> initial_weights;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<Optimizer> optimizer;  // optimizer.name's
  std::vector<std::string> notes;        // for the log: stand-in data, settings without effect
  // Settings without effect on place.world ranks (rank_checks.h): warnings, and run.yaml's notes.
  std::vector<std::string> no_effect;
  std::string planned;  // what a planner decided for `auto` keys, and why (empty: nothing)
  // The memory table's figures, when RunPlace::memory asked for the check and the algorithm's
  // ranks are data-parallel.
  std::optional<MemoryReport> memory;
  // A dry run's model too large for this host: why it was not built (model, optimizer and
  // loaders are then null).
  std::string not_built;
};

// Builds everything but the scheduler. InputError (exit 2) for what the config and the place
// cannot do together (a global batch not divisible by the ranks, a missing dataset when files
// are required, a model.init_from file that is not this model's weights), before anything large
// is allocated.
std::unique_ptr<Run> build_run(const ExperimentConfig& config, const RunPlace& place,
                               DataFiles data = DataFiles::required);

// The job's communicator as the experiment wants it: paced to cluster.link when emulating a
// network (docs/architecture.md, decision 6), else unchanged.
std::unique_ptr<Comm> configure_comm(const ExperimentConfig& config, std::unique_ptr<Comm> comm);

// What a model-parallel scheduler builds its part of the model from.
ModelSource model_source(const Run& run);
// The training set in whole minibatches (dataset.batch_size rows), as the only rank: what a
// pipeline's input stage reads, for profiling it.
std::unique_ptr<Loader> minibatch_loader(const Run& run);

// For `--dry-run` of a model-parallel algorithm (pipedream) on fewer ranks than it needs: what
// each rank would hold and the schedule, for the ranks the configuration names, then the whole
// model's summary (ending with "parameters: N"). Empty for other algorithms.
std::string preview_model_parallel(const ExperimentConfig& config);

// model.init_from's tensors, read and checked against `model` (the whole model), and loaded
// into it. InputError naming the config, model.init_from, the file and the first tensor at
// fault.
NamedTensors load_initial_weights(const ExperimentConfig& config, Model& model);

// The scheduler of the configured algorithm on `run`, communicating over `comm` (whose rank and
// size must be the run's place). `stop`: where a signal's stop is agreed (the trainer's).
std::unique_ptr<Scheduler> build_scheduler(Run& run, Comm& comm,
                                           std::function<void(const IterationReport&)> progress,
                                           StopVote* stop = nullptr);

}  // namespace dtrain
