#include "run/rank_checks.h"

#include <fmt/format.h>

#include <algorithm>  // max_element

#include "core/error.h"       // DTRAIN_INPUT_CHECK
#include "run/run_options.h"  // nearest_batches
#include "sched/algorithm.h"  // AlgorithmEntry: model parallel, what it compresses

namespace dtrain {

namespace {
constexpr const char* kNoEffect = "no effect: ";
}  // namespace

void check_stragglers(const ExperimentConfig& config, int world) {
  for (size_t i = 0; i < config.cluster.stragglers.size(); ++i) {
    const int rank = config.cluster.stragglers[i].rank;
    DTRAIN_INPUT_CHECK(rank < world)
        << config.source_path << ": cluster.stragglers[" << i << "].rank: " << rank
        << ", but the job has " << world << " rank(s)";
  }
}

void check_world(const ExperimentConfig& config, int world) {
  DTRAIN_INPUT_CHECK(world >= 1) << "--ranks: must be >= 1, got " << world;
  check_stragglers(config, world);
  if (const std::optional<ModelParallelEntry>& model_parallel =
          config.algorithm.entry().model_parallel) {
    // Model parallel: the layout's ranks, when the configuration fixes them.
    const int needed =
        model_parallel->ranks_needed ? model_parallel->ranks_needed(config.algorithm) : 0;
    DTRAIN_INPUT_CHECK(needed == 0 || needed == world)
        << config.source_path << ": algorithm.stages, algorithm.replicas: " << config.algorithm.name
        << " needs " << needed << " rank(s) as configured, but the job has " << world;
    return;
  }
  DTRAIN_INPUT_CHECK(config.dataset.batch_size % world == 0)
      << config.source_path << ": dataset.batch_size: the global batch "
      << config.dataset.batch_size << " must be divisible by the " << world
      << " data-parallel ranks (nearest: " << nearest_batches(config.dataset.batch_size, world)
      << ")";
  check_accumulation(config, world);
}

void check_accumulation(const ExperimentConfig& config, int world) {
  const int64_t local = config.dataset.batch_size / std::max(world, 1);
  const int steps = config.train.accumulation_steps;
  DTRAIN_INPUT_CHECK(steps >= 1 && local % steps == 0)
      << config.source_path << ": train.accumulation_steps: " << steps
      << " must divide each rank's batch, dataset.batch_size " << config.dataset.batch_size << " / "
      << world << " rank(s) = " << local << ", into equal micro-batches";
}

std::vector<std::string> unchecked_on_one_rank(const ExperimentConfig& config) {
  const auto& stragglers = config.cluster.stragglers;
  const auto last = std::max_element(stragglers.begin(), stragglers.end(),
                                     [](const auto& a, const auto& b) { return a.rank < b.rank; });
  if (last == stragglers.end() || last->rank < 1) return {};
  return {fmt::format("not checked: cluster.stragglers names rank {}; give --ranks N", last->rank)};
}

std::vector<std::string> no_effect_settings(const ExperimentConfig& config, int world) {
  std::vector<std::string> lines;
  auto add = [&lines](const std::string& key, const std::string& why) {
    lines.push_back(kNoEffect + key + ": " + why);
  };
  if (config.compression.name != "none") {
    const AlgorithmEntry& algorithm = config.algorithm.entry();
    const bool compresses =
        algorithm.compresses ? algorithm.compresses(config.algorithm, world) : world > 1;
    if (!compresses)
      add("compression.name", fmt::format("'{}' encodes the gradients the ranks reduce together, "
                                          "and {} on {} rank(s) reduces none",
                                          config.compression.name, config.algorithm.name, world));
  }
  if (world == 1 && config.cluster.link)
    add("cluster.link", "the emulated link paces messages between ranks, and one rank sends none");
  if (world == 1 && !config.cluster.stragglers.empty())
    add("cluster.stragglers",
        "a straggler delays the ranks that wait for it, and one rank waits for none (its "
        "slow-down only stretches the run)");
  return lines;
}

}  // namespace dtrain
