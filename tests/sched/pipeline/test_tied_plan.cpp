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

TEST_CASE("a replicated stage's all-reduce waits reduce_wait_s once per round, others not") {
  // One stage on 4 replicas: a round of 4 minibatches, one all-reduce of 4 MB over 6 messages
  // of 1 MB at 1 GB/s (1 ms each), no latency; each replica's minibatch takes 4 ms.
  const std::vector<LayerProfile> chain{{"l0", 2e-3, 2e-3, 1e3, 4e6}};
  PipelineLink link;
  link.cost.bandwidth_bytes_per_s = 1e9;
  PipedreamOptions o;
  o.stages = config::WordOr<std::vector<std::string>>{"", {}};
  o.replicas = config::WordOr<std::vector<int>>{"", {4}};
  const PipelineChoice plain = choose_pipeline(chain, o, 4, link);
  link.reduce_wait_s = 2e-3;  // as the plan sets it: crowding × yield_wait_s
  const PipelineChoice waiting = choose_pipeline(chain, o, 4, link);
  // Per minibatch: the round's 2 ms wait shared by its 4 minibatches.
  CHECK(waiting.chosen_s - plain.chosen_s == doctest::Approx(2e-3 / 4));
  // Unreplicated stages all-reduce nothing and wait for nothing.
  o.replicas = config::WordOr<std::vector<int>>{"", {1}};
  CHECK(choose_pipeline(chain, o, 1, link).chosen_s ==
        doctest::Approx(choose_pipeline(chain, o, 1, PipelineLink{link.cost}).chosen_s));
}
