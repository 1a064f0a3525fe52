// PipeDream's planner with a tie between the chain's ends (a GPT's embedding and head): under
// 1f1b the first and last stages sum that weight's gradients every step and so must step as
// often; a partition left to the planner that gives them unequal replicas falls back. And what a
// replicated stage's all-reduce waits for in the planner and in dtrain plan's row.
#include <doctest/doctest.h>

#include "plan/profiler.h"    // TransportTimes
#include "sched/algorithm.h"  // chain_planning_algorithm: the plan's PipeDream row
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
  link.reduce_wait_s = 2e-3;  // as the plan sets it: the slowest replica's lag
  const PipelineChoice waiting = choose_pipeline(chain, o, 4, link);
  // Per minibatch: the round's 2 ms wait shared by its 4 minibatches.
  CHECK(waiting.chosen_s - plain.chosen_s == doctest::Approx(2e-3 / 4));
  // Unreplicated stages all-reduce nothing and wait for nothing.
  o.replicas = config::WordOr<std::vector<int>>{"", {1}};
  CHECK(choose_pipeline(chain, o, 1, link).chosen_s ==
        doctest::Approx(choose_pipeline(chain, o, 1, PipelineLink{link.cost}).chosen_s));
}

TEST_CASE("dtrain plan's PipeDream row: a replicated stage waits for the slowest replica's lag") {
  // Data parallelism on 4 ranks of 2 cores: the chain is already stretched by the sharing (4 ms
  // a minibatch), and a replica's compute thread sleeps in the all-reduce, so the round waits
  // for the lag it is given (replica_lag_s), never for the transport's yield wait.
  const AlgorithmEntry* planner = chain_planning_algorithm();
  REQUIRE(planner != nullptr);
  AlgorithmConfig a("pipedream");
  auto& o = a.get<PipedreamOptions>();
  o.stages = config::WordOr<std::vector<std::string>>{"", {}};
  o.replicas = config::WordOr<std::vector<int>>{"", {4}};
  const std::vector<LayerProfile> chain{{"l0", 2e-3, 2e-3, 1e3, 4e3}};
  TransportTimes transport;
  transport.copy_s_per_byte = 1e-10;
  transport.yield_wait_s = 1.5e-3;  // the old row waited crowding x this once a round
  auto predicted = [&](double lag) {
    return planner
        ->plan_chain(a, {.chain = chain,
                         .ranks = 4,
                         .batch = 64,
                         .link = std::nullopt,
                         .transport = &transport,
                         .replica_lag_s = lag})
        .row.iteration_s;
  };
  // Per minibatch: a quarter of the round's lag.
  CHECK(predicted(2e-3) - predicted(0) == doctest::Approx(2e-3 / 4).epsilon(1e-6));
  // With no lag: the round is the replica's 4 ms and the all-reduce's messages (4 KB), no more.
  CHECK(predicted(0) == doctest::Approx(4e-3 / 4).epsilon(0.05));
}
