// What the number of ranks decides about an experiment, known only when the job starts (or from
// `dtrain --dry-run --ranks N`): keys that name ranks or must divide by them, and settings that
// have no effect on so few ranks (warnings, which run.yaml's notes keep for scripts/sweep.py).
#pragma once
#include <string>
#include <vector>

#include "run/config.h"  // ExperimentConfig

namespace dtrain {

// InputError when cluster.stragglers names a rank the job of `world` ranks does not have (a
// plan for fewer ranks than the config's stragglers simply ignores them).
void check_stragglers(const ExperimentConfig& config, int world);

// InputError naming the key when the experiment cannot run on `world` ranks for a reason only
// the number of ranks shows: cluster.stragglers names a rank the job lacks, the global batch
// does not split over the data-parallel ranks, a model-parallel algorithm's stages and replicas
// need another number of ranks.
void check_world(const ExperimentConfig& config, int world);

// InputError naming train.accumulation_steps when it does not split each of `world`
// data-parallel ranks' batches (dataset.batch_size / world) into equal micro-batches.
void check_accumulation(const ExperimentConfig& config, int world);

// What check_world would refuse on one rank that a one-process dry run without --ranks cannot
// judge: "not checked: cluster.stragglers names rank 1; give --ranks N". Empty when nothing.
std::vector<std::string> unchecked_on_one_rank(const ExperimentConfig& config);

// The settings that have no effect on a job of `world` ranks, each "no effect: KEY: why"
// (compression where nothing is all-reduced, cluster.link or cluster.stragglers on one rank).
// `config` as planned: a planner's `auto` keys filled in, or left open (then no warning).
std::vector<std::string> no_effect_settings(const ExperimentConfig& config, int world);

}  // namespace dtrain
