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

TEST_CASE("dtrain plan's PipeDream row: a replicated stage waits for the lag and crowded cores") {
  // Data parallelism on 4 ranks: the chain is already stretched (4 ms a minibatch). A round
  // waits for the slowest replica's lag (replica_lag_s) and, on crowded cores, for the last comm
  // thread's core (crowded_wait_s), at most the replica's compute alone (4 ms / crowding).
  const AlgorithmEntry* planner = chain_planning_algorithm();
  REQUIRE(planner != nullptr);
  AlgorithmConfig a("pipedream");
  auto& o = a.get<PipedreamOptions>();
  o.stages = config::WordOr<std::vector<std::string>>{"", {}};
  o.replicas = config::WordOr<std::vector<int>>{"", {4}};
  const std::vector<LayerProfile> chain{{"l0", 2e-3, 2e-3, 1e3, 4e3}};
  TransportTimes transport;
  transport.copy_s_per_byte = 1e-10;
  auto predicted = [&](double lag, double crowded_wait, double crowding) {
    return planner->model_parallel
        ->plan_chain(a, {.chain = chain,
                         .ranks = 4,
                         .batch = 64,
                         .link = std::nullopt,
                         .transport = &transport,
                         .replica_lag_s = lag,
                         .crowded_wait_s = crowded_wait,
                         .crowding = crowding})
        .row.iteration_s;
  };
  const double plain = predicted(0, 0, 1);
  // With no lag and no crowding: the round is the replica's 4 ms and the all-reduce's messages
  // (4 KB), no more.
  CHECK(plain == doctest::Approx(4e-3 / 4).epsilon(0.05));
  // Per minibatch: a quarter of the round's lag.
  CHECK(predicted(2e-3, 0, 1) - plain == doctest::Approx(2e-3 / 4).epsilon(1e-6));
  // A crowded wait of 1.5 ms a round, below the replica's 2 ms alone: all of it.
  CHECK(predicted(0, 1.5e-3, 2) - plain == doctest::Approx(1.5e-3 / 4).epsilon(1e-6));
  // 3 ms: capped at the replica's compute alone, 4 ms / 2.
  CHECK(predicted(0, 3e-3, 2) - plain == doctest::Approx(2e-3 / 4).epsilon(1e-6));
  // The lag and the crowded wait add.
  CHECK(predicted(1e-3, 1.5e-3, 2) - plain == doctest::Approx(2.5e-3 / 4).epsilon(1e-6));
}

TEST_CASE("dtrain plan's PipeDream row: the partition the run's own profile picks, predicted") {
  // Two ranks, three pieces of large weights (data parallelism pays a 2 GB all-reduce) and small
  // activations: a 1-1 pipeline, cut where the stages balance. The run profiles the chain
  // itself and balances {l0, l1} against {l2}; the plan's chain (here: another stretch of the
  // pieces) would balance {l0} against {l1, l2}. The row trains what the run trains.
  const AlgorithmEntry* planner = chain_planning_algorithm();
  REQUIRE(planner != nullptr);
  AlgorithmConfig a("pipedream");
  const std::vector<LayerProfile> as_run{{"l0", 0.5e-3, 0.5e-3, 1e3, 1e9},
                                         {"l1", 0.5e-3, 0.5e-3, 1e3, 1e9},
                                         {"l2", 1e-3, 1e-3, 1e3, 1e9}};
  const std::vector<LayerProfile> stretched{
      {"l0", 2e-3, 2e-3, 1e3, 1e9}, {"l1", 1e-3, 1e-3, 1e3, 1e9}, {"l2", 1e-3, 1e-3, 1e3, 1e9}};
  TransportTimes transport;
  transport.copy_s_per_byte = 1e-10;
  auto plan = [&](const std::vector<LayerProfile>* run_chain) {
    return planner->model_parallel->plan_chain(a, {.chain = stretched,
                                                   .run_chain = run_chain,
                                                   .ranks = 2,
                                                   .batch = 64,
                                                   .link = std::nullopt,
                                                   .transport = &transport});
  };
  const ChainPlan own = plan(nullptr), run = plan(&as_run);
  CHECK(own.row.configuration == "1-1");
  CHECK(run.row.configuration == "1-1");
  CHECK(own.text.find("chosen: stages [l1]") != std::string::npos);
  CHECK(run.text.find("chosen: stages [l2]") != std::string::npos);
  // Predicted with the plan's chain: {l0, l1} takes 6 ms a minibatch there, {l0} 4 ms.
  CHECK(run.row.iteration_s > own.row.iteration_s * 1.3);
}
