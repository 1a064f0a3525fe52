// `dtrain plan`: profiles the experiment's model on one rank, measures what the timing model
// needs (lib/plan/profiler.h), and prints the predicted iteration time and speedup of every
// algorithm with a timing row with each codec, what the algorithms recommend for this model and
// cluster (the Pipe-SGD paper's rule), and the model-parallel planner's choice. Everything
// algorithm-specific comes from the registry's rows (sched/algorithm.h). No training, nothing
// written except the optional CSV and layer profile.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "plan/timing_model.h"  // Prediction
#include "run/config.h"         // ExperimentConfig
#include "run/run_builder.h"    // Run

namespace dtrain {

struct PlanOptions {
  int ranks = 2;    // data-parallel ranks to predict for (--ranks)
  std::string csv;  // --csv FILE: one row per candidate; empty: none
  // --write-profile FILE: also write PipeDream's layer profile of the model (measured here).
  std::string write_profile;
  // --profile FILE: plan PipeDream from this layer profile instead of building the model; only
  // the pipedream rows (the data-parallel rows need the model).
  std::string profile;
  // Profiled iterations after the warm-up; fewer when they would take longer than ~2 s.
  int iterations = 15;
};

// The experiment `dtrain plan --profile P.csv` plans without --config: the defaults, with the
// algorithm that plans from a layer profile (pipedream) so that its keys need no algorithm.name
// (--set algorithm.partition_cost=runtime), then the --set `overrides`.
ExperimentConfig profile_plan_config(const std::string& profile,
                                     const std::vector<std::string>& overrides);

// The rank `dtrain plan` profiles for `ranks` data-parallel ranks: rank 0 as training builds it
// (run_builder.h), with a stand-in of the dataset's shape when its files are missing.
std::unique_ptr<Run> build_plan_run(const ExperimentConfig& config, int ranks);

// InputError (exit 2) when the ranks do not fit the config (--ranks < 1, a global batch not
// divisible by them); the config file is named in the message.
void run_plan(const ExperimentConfig& config, const PlanOptions& options, std::ostream& out);

// The docs/architecture.md §3 CSV:
// `algorithm,compression,compute_s,comm_s,predicted_iteration_s,bound,configuration,
// samples_per_s,equivalence,memory_per_rank_bytes,fits_memory` (data-parallel rows: the rank
// count; `memory`: each row's bytes per rank, 0 or missing where not modelled; fits_memory
// against `limit`, empty where either is unknown).
std::string plan_csv(const std::vector<Prediction>& predictions, int ranks,
                     const std::vector<int64_t>& memory = {}, int64_t limit = 0);

}  // namespace dtrain
