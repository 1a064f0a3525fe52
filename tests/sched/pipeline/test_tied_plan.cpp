// PipeDream's planner with a tie between the chain's ends (a GPT's embedding and head): under
// 1f1b the first and last stages sum that weight's gradients every step and so must step as
// often; a partition left to the planner that gives them unequal replicas falls back.
#include <doctest/doctest.h>

#include "sched/pipeline/pipedream_plan.h"

using namespace dtrain;

TEST_CASE("replicas: auto keeps tied ends' replicas equal under 1f1b") {
  // A heavy first piece and a last piece of large weights: 3-1 is best on 4 ranks (the weights
  // are not replicated), data parallelism pays their all-reduce.
  const std::vector<LayerProfile> chain{
      {"l0", 1.5, 1.5, 1e3, 1e3}, {"l1", 0.25, 0.25, 1e3, 1e3}, {"l2", 0.25, 0.25, 1e3, 2e9}};
  PipelineLink link;
  link.cost.bandwidth_bytes_per_s = 1e9;
  PipedreamOptions o;
  const PipelineChoice free = choose_pipeline(chain, o, 4, link);
  CHECK(free.chosen.configuration() == "3-1");
  const PipelineChoice tied = choose_pipeline(chain, o, 4, link, /*tied_ends=*/true);
  CHECK(tied.chosen.replicas.front() == tied.chosen.replicas.back());
  CHECK(tied.chosen.machines() == 4);
  // gpipe steps once per minibatch on every stage: any replicas pair their steps.
  o.schedule = "gpipe";
  CHECK(choose_pipeline(chain, o, 4, link, true).chosen.configuration() == "3-1");
}
