// What the number of ranks decides (rank_checks.h): the keys checked for a job of N ranks, what a
// one-process dry run notes it could not check, and the settings without effect on N ranks.
#include "run/rank_checks.h"

#include <doctest/doctest.h>

#include "core/error.h"

using namespace dtrain;

namespace {
ExperimentConfig tiny(const std::string& extra) {
  return parse_config("model: {name: mlp}\ndataset: {name: synthetic, batch_size: 30}\n" + extra,
                      "ranks.yaml");
}
}  // namespace

TEST_CASE("check_world refuses what N ranks cannot run, naming the key") {
  const ExperimentConfig c = tiny("cluster: {device: cpu, stragglers: [{rank: 3, slowdown: 2}]}\n");
  CHECK_NOTHROW(check_world(c, 6));
  CHECK_THROWS_WITH_AS(check_world(c, 2),
                       doctest::Contains("cluster.stragglers[0].rank: 3, but the job has 2"),
                       InputError);
  CHECK_THROWS_WITH_AS(check_world(c, 4), doctest::Contains("dataset.batch_size"), InputError);
  const ExperimentConfig pipe =
      tiny("algorithm: {name: pipedream, stages: [fc2], replicas: [2, 1]}\n");
  CHECK_NOTHROW(check_world(pipe, 3));
  CHECK_THROWS_WITH_AS(check_world(pipe, 2), doctest::Contains("needs 3 rank(s)"), InputError);
}

TEST_CASE("a one-process dry run notes the stragglers it cannot check") {
  CHECK(unchecked_on_one_rank(tiny("")).empty());
  CHECK(unchecked_on_one_rank(tiny("cluster: {stragglers: [{rank: 0, slowdown: 2}]}\n")).empty());
  const auto notes = unchecked_on_one_rank(
      tiny("cluster: {stragglers: [{rank: 2, slowdown: 2}, {rank: 1, slowdown: 3}]}\n"));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "not checked: cluster.stragglers names rank 2; give --ranks N");
}

TEST_CASE("settings without effect depend on the ranks") {
  const ExperimentConfig c = tiny(
      "compression: {name: quantize8}\ncluster: {link: {bandwidth: 1Gbps}, stragglers: "
      "[{rank: 0, slowdown: 2}]}\n");
  const auto one = no_effect_settings(c, 1);
  REQUIRE(one.size() == 3);
  CHECK(one[0].starts_with("no effect: compression.name: "));
  CHECK(one[1].starts_with("no effect: cluster.link: "));
  CHECK(one[2].starts_with("no effect: cluster.stragglers: "));
  CHECK(no_effect_settings(c, 2).empty());
  // PipeDream all-reduces only in a replicated stage; left to the planner, it may have one.
  const std::string codec = "compression: {name: quantize8}\n";
  CHECK(
      no_effect_settings(tiny(codec + "algorithm: {name: pipedream, stages: [fc2]}\n"), 2).size() ==
      1);
  CHECK(
      no_effect_settings(tiny(codec + "algorithm: {name: pipedream, stages: [fc2]}\n"), 3).empty());
  CHECK(no_effect_settings(tiny(codec + "algorithm: {name: pipedream, stages: [fc2], replicas: "
                                        "[1, 1]}\n"),
                           2)
            .size() == 1);
  CHECK(no_effect_settings(tiny(codec + "algorithm: {name: pipedream}\n"), 2).empty());
}
