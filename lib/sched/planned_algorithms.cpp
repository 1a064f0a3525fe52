#include "sched/planned_algorithms.h"

namespace dtrain {

namespace {

using namespace config;

AlgorithmEntry pipedream() {
  auto keys = Schema<PipedreamOptions>("pipedream")
                  .key("schedule", &PipedreamOptions::schedule,
                       choice({"1f1b", "gpipe", "1f1b_flush"}), "pipeline schedule")
                  .key("stages", &PipedreamOptions::stages,
                       word_or({"auto"}, list_of(nonempty_text(), 0, 1)),
                       "the first layer of stage 2, 3, ... (auto: PipeDream's partitioner)")
                  .key("replicas", &PipedreamOptions::replicas,
                       word_or({"auto"}, list_of(integer(Bounds::at_least(1)), 0, 1)),
                       "ranks per stage, summing to the ranks (auto: the partitioner's)")
                  .key("in_flight", &PipedreamOptions::in_flight,
                       word_or({"auto"}, integer(Bounds::at_least(1))),
                       "minibatches in flight (auto: NOAM = ⌈ranks / replicas of stage 1⌉)")
                  .key("microbatches", &PipedreamOptions::microbatches,
                       integer(Bounds::at_least(1)), "microbatches per minibatch")
                  .key("weight_stashing", &PipedreamOptions::weight_stashing, boolean(),
                       "backward uses the weights its forward used")
                  .key("vertical_sync", &PipedreamOptions::vertical_sync, boolean(),
                       "every stage uses the weights of the same version")
                  .key("partition_cost", &PipedreamOptions::partition_cost,
                       choice({"paper", "runtime"}), "the partitioner's cost model");
  return {"pipedream",
          "PipeDream (Harlap et al., 2018): pipeline-parallel stages, 1F1B, weight stashing, "
          "replicated stages",
          erase(std::move(keys)),
          {},
          "the PipeDream runtime and planner issues",
          {}};
}

}  // namespace

std::vector<AlgorithmEntry> planned_algorithms() {
  return {pipedream()};
}

}  // namespace dtrain
