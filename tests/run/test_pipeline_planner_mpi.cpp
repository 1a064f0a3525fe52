// stages: auto on a job: every rank builds its run with rank 0's decision — the lists the
// planner fills in are whatever the agreement returns (here a broadcast, as the trainer does),
// whatever this rank measured.
#include <doctest/doctest.h>

#include <string>

#include "comm/mpi_comm.h"  // make_mpi_comm
#include "run/config.h"
#include "run/run_builder.h"
#include "sched/pipeline/pipedream_scheduler.h"  // PipedreamOptions

using namespace dtrain;

namespace {

// An MLP of equal hidden layers: cuts that nearly tie, so that noisy timings could differ.
ExperimentConfig mlp_auto(const std::string& cost) {
  return parse_config(
      "model: {name: mlp, hidden: [256, 256, 256]}\n"
      "dataset: {name: synthetic, shape: [1, 16, 16], classes: 10, train_size: 512, test_size: "
      "64, batch_size: 64}\n"
      "cluster: {device: cpu, link: {bandwidth: 1Gbps, latency: 50us}}\n"
      "algorithm: {name: pipedream, stages: auto, replicas: auto, partition_cost: " +
          cost + "}\n",
      "auto.yaml");
}

std::string decision(const Run& run) {
  const auto& o = run.config.algorithm.get<PipedreamOptions>();
  std::string text;
  for (int r : o.replicas.value) text += std::to_string(r) + " ";
  for (const std::string& s : o.stages.value) text += s + " ";
  return text;
}

}  // namespace

TEST_CASE("stages: auto is rank 0's decision on every rank") {
  auto comm = make_mpi_comm();
  const int world = comm->size();
  for (const char* cost : {"runtime", "paper"}) {
    CAPTURE(cost);
    auto broadcast = [&](const std::string& text) {
      std::string bytes = text;
      comm->broadcast(bytes, 0);
      return bytes;
    };
    auto run = build_run(mlp_auto(cost), {comm->rank(), world, 0, false, broadcast});
    const auto& o = run->config.algorithm.get<PipedreamOptions>();
    CHECK(!o.stages.is("auto"));
    CHECK(!o.replicas.is("auto"));
    int ranks = 0;
    for (int r : o.replicas.value) ranks += r;
    CHECK(ranks == world);
    CHECK(o.replicas.value.size() == o.stages.value.size() + 1);
    CHECK(run->planned.find("PipeDream's planner") != std::string::npos);
    std::string mine = decision(*run), root = mine;
    comm->broadcast(root, 0);
    CHECK(mine == root);
  }

  // Whatever this rank measured, the run takes what the agreement returns.
  auto forced = [world](const std::string&) {
    return world == 2 ? std::string("1,1\nfc2") : std::string("1,1,1\nfc2\nfc3");
  };
  auto run = build_run(mlp_auto("runtime"), {comm->rank(), world, 0, false, forced});
  CHECK(decision(*run) == (world == 2 ? "1 1 fc2 " : "1 1 1 fc2 fc3 "));
}
