// The memory of a run before it is built (docs/memory.md, "Seeing it before the run"): the
// memory model's figures (sched/shard/memory_model.h) for this experiment, the limit a rank must
// fit in (cluster.memory_per_rank, else the device's or this host's available memory shared by
// its ranks), the table --dry-run and every run print, and the start-up check that refuses
// (exit 2) a run that cannot fit, before its model is allocated. Nothing here allocates a model:
// the figures come from its structure (count_parameters, estimate_activation_bytes).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"           // Backend: a GPU's memory
#include "nn/model_input.h"            // ModelInput
#include "run/config.h"                // ExperimentConfig
#include "sched/shard/memory_model.h"  // MemoryInputs, RankMemory

namespace dtrain {

// The job the figures are for: its data-parallel ranks, and how many of them share this host's
// memory (Comm::local_size; a one-process --dry-run --ranks N assumes all N do).
struct MemoryPlace {
  int ranks = 1;
  int local_ranks = 1;
  // False for a dry run in one process without --ranks: the job's ranks are not known, so a
  // table that does not fit is a note (pass --ranks N), not a refusal.
  bool ranks_known = true;
};

// What a rank may hold: 0 bytes when nothing is known (no check).
struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;  // "cluster.memory_per_rank 20GB", "this host's available ... / 2 ranks"
};

struct MemoryReport {
  MemoryInputs inputs;  // as configured, for the job's ranks
  RankMemory rank;      // the rank that holds most
  MemoryLimit limit;
  // The settings of algorithm.shard (where the algorithm has the key) and model.recompute that
  // would fit when the configured ones do not ("algorithm.shard: gradients (1.20 GB)").
  std::vector<std::string> would_fit;
  bool fits() const { return limit.bytes == 0 || rank.total() <= limit.bytes; }
};

// Whether the memory model describes the algorithm's ranks: data parallelism (each rank holds
// the whole model, or its shard of it); not a pipeline's stages.
bool memory_modelled(const ExperimentConfig& config);
// model.recompute as configured (false until the nn branch adds the key).
bool configured_recompute(const ExperimentConfig& config);

// The model's batch on each of `ranks` data-parallel ranks, as build_run builds it: the local
// batch (the larger of train and test), or the micro-batch with train.accumulation_steps > 1.
int64_t build_batch(const ExperimentConfig& config, int ranks);
// The memory model's inputs for `config` on `ranks` ranks with `shard`: `like` gives the sample
// shape, classes and precision (its batch is replaced by build_batch).
MemoryInputs memory_inputs(const ExperimentConfig& config, const ModelInput& like, int ranks,
                           ShardMode shard);
// cluster.memory_per_rank; else the device's memory on a GPU backend; else MemAvailable of this
// host over `local_ranks`.
MemoryLimit memory_limit(const ExperimentConfig& config, const Backend& backend, int local_ranks);
MemoryReport memory_report(const ExperimentConfig& config, const ModelInput& like,
                           const Backend& backend, const MemoryPlace& place);

// The per-rank table: a row per kind and the total, human and exact, both activation figures,
// the limit.
std::string memory_table(const MemoryReport& report);
// InputError (exit 2) with the table, the limit and what would fit, when the run cannot fit.
void check_memory(const MemoryReport& report, const std::string& source_path);

}  // namespace dtrain
