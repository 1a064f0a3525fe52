// The experiment's keys from the registry and the schema: each algorithm takes exactly its own
// keys, keys that do not apply are errors, and
// what is resolved says only what applies.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/error.h"
#include "run/config.h"
#include "run/plan_command.h"  // profile_plan_config
#include "sched/algorithm.h"
#include "sched/hpsgd/hpsgd_algorithm.h"         // HpsgdOptions
#include "sched/pipeline/pipedream_scheduler.h"  // PipedreamOptions
#include "sched/sync_scheduler.h"

using namespace dtrain;

namespace {

const char* kValid = "model: {name: mlp}\ndataset: {name: fashion_mnist}\n";

std::string error_of(const std::string& yaml, std::vector<std::string> overrides = {}) {
  try {
    parse_config(yaml, "exp.yaml", overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("every algorithm key given to another algorithm is an error naming both") {
  int checked = 0;
  for (const AlgorithmEntry& chosen : algorithms()) {
    for (const AlgorithmEntry& owner : algorithms()) {
      if (owner.name == chosen.name) continue;
      // A valid value of the key: the owner's default.
      const YAML::Node defaults = write_algorithm(AlgorithmConfig(owner.name), config::Style::file);
      for (const std::string& key : owner.keys->keys()) {
        if (chosen.keys->has_key(key)) continue;
        CAPTURE(chosen.name);
        CAPTURE(key);
        const std::string value = config::one_line(defaults[key]);
        const std::string msg = error_of(std::string(kValid) + "algorithm: {name: " + chosen.name +
                                         ", " + key + ": " + value + "}\n");
        CHECK(msg.find("exp.yaml:3: algorithm." + key + ": belongs to algorithm ") !=
              std::string::npos);
        CHECK(msg.find(owner.name) != std::string::npos);
        CHECK(msg.find("not to the chosen '" + chosen.name + "'") != std::string::npos);
        ++checked;
      }
    }
  }
  CHECK(checked > 20);
}

TEST_CASE("switching the algorithm by --set algorithm.name says how to switch its keys too") {
  const std::string pipe = std::string(kValid) + "algorithm: {name: pipe_sgd, K: 3}\n";
  const std::string msg = error_of(pipe, {"algorithm.name=sync"});
  CHECK(msg.find("exp.yaml:3: algorithm.K: belongs to algorithm pipe_sgd, not to the chosen "
                 "'sync' (sync's keys: segments, shard); to switch algorithms, replace the whole map: "
                 "--set 'algorithm={name: sync}'") != std::string::npos);
  CHECK(parse_config(pipe, "exp.yaml", {"algorithm={name: sync}"}).algorithm.name == "sync");
  // A key given in the same --set as the name gets no such hint.
  CHECK(error_of(kValid, {"algorithm={name: sync, K: 3}"}).find("replace the whole map") ==
        std::string::npos);
}

TEST_CASE("every registered algorithm trains; an unknown name suggests the nearest") {
  const std::vector<std::string> names = algorithm_names();
  CHECK(names == std::vector<std::string>{"sync", "ps_sync", "pipe_sgd", "local_sgd", "gossip",
                                          "d_psgd", "hpsgd", "sapipe", "pipedream"});
  CHECK(error_of(kValid, {"algorithm.name=pipedrem"}).find("did you mean 'pipedream'?") !=
        std::string::npos);
  CHECK(error_of(kValid, {"algorithm.name=sapip"}).find("did you mean 'sapipe'?") !=
        std::string::npos);
  CHECK(error_of(kValid, {"algorithm.name=gosip"}).find("did you mean 'gossip'?") !=
        std::string::npos);
  CHECK(error_of(kValid, {"algorithm.name=locl_sgd"}).find("did you mean 'local_sgd'?") !=
        std::string::npos);
}

TEST_CASE("algorithm keys: defaults, auto | N, and exactly the chosen algorithm's in the file") {
  ExperimentConfig c = parse_config(kValid, "exp.yaml");
  CHECK(to_yaml(c).find("algorithm: {name: sync, segments: auto, shard: none}") != std::string::npos);
  c = parse_config(kValid, "exp.yaml", {"algorithm.segments=4"});
  CHECK(c.algorithm.get<SyncOptions>().segments == config::WordOr<int>::of(4));
  c = parse_config(kValid, "exp.yaml", {"algorithm={name: local_sgd}"});
  CHECK(to_yaml(c).find("algorithm: {name: local_sgd, sync_period: 8}") != std::string::npos);
  c = parse_config(kValid, "exp.yaml", {"algorithm={name: ps_sync}"});
  CHECK(to_yaml(c).find("algorithm: {name: ps_sync}") != std::string::npos);
  CHECK(error_of(kValid, {"algorithm.segments=0"}).find("algorithm.segments: must be >= 1") !=
        std::string::npos);
}

TEST_CASE("hpsgd: sync_period auto | N, with SGD (momentum too) or AdamW, clipping") {
  ExperimentConfig c = parse_config(kValid, "exp.yaml", {"algorithm={name: hpsgd}"});
  CHECK(to_yaml(c).find("algorithm: {name: hpsgd, sync_period: auto}") != std::string::npos);
  c = parse_config(kValid, "exp.yaml", {"algorithm={name: hpsgd, sync_period: 4}"});
  CHECK(c.algorithm.get<HpsgdOptions>().sync_period == config::WordOr<int>::of(4));
  CHECK(
      error_of(kValid, {"algorithm={name: hpsgd, sync_period: 0}"}).find("algorithm.sync_period") !=
      std::string::npos);
  // The default momentum (0.9), AdamW and a clip are accepted.
  c = parse_config(kValid, "exp.yaml",
                   {"algorithm={name: hpsgd}", "optimizer={name: adamw, lr: 0.001}",
                    "optimizer.clip_grad_norm=1"});
  CHECK(c.optimizer.name == "adamw");
}

TEST_CASE("dtrain plan --profile without --config plans pipedream: its keys need no name") {
  ExperimentConfig c = profile_plan_config("p.csv", {"algorithm.partition_cost=runtime"});
  CHECK(c.algorithm.name == "pipedream");
  CHECK(c.algorithm.get<PipedreamOptions>().partition_cost == "runtime");
  // Naming the algorithm as before still works, and so does naming another one.
  c = profile_plan_config("p.csv",
                          {"algorithm.name=pipedream", "algorithm.partition_cost=runtime"});
  CHECK(c.algorithm.get<PipedreamOptions>().partition_cost == "runtime");
  CHECK(profile_plan_config("p.csv", {"algorithm.name=sync"}).algorithm.name == "sync");
}

TEST_CASE("keys that do not apply are errors; the resolved file holds what applies") {
  CHECK(error_of(std::string(kValid) + "optimizer: {schedule: {name: cosine, milestones: [3]}}\n")
            .find("exp.yaml:3: optimizer.schedule.milestones: applies only to schedule "
                  "multistep, not to 'cosine'") != std::string::npos);
  CHECK(error_of(std::string(kValid) + "optimizer: {schedule: {name: constant, gamma: 0.5}}\n")
            .find("optimizer.schedule.gamma: applies only to schedule step or multistep") !=
        std::string::npos);
  const char* cifar = "model: {name: mlp}\ndataset: {name: cifar100, path: /data/c100, ";
  CHECK(error_of(std::string(cifar) + "shape: [1, 28, 28], classes: 10}\n")
            .find("exp.yaml:2: dataset.shape: applies only to dataset synthetic, not to "
                  "'cifar100'") != std::string::npos);
  CHECK(error_of(std::string(cifar) + "image_size: 64}\n")
            .find("dataset.image_size: applies only to dataset imagefolder") != std::string::npos);
  CHECK(error_of("model: {name: mlp}\ndataset: {name: synthetic, path: /x}\n")
            .find("dataset.path: applies only to dataset") != std::string::npos);

  const std::string yaml = to_yaml(parse_config(std::string(cifar) + "}\n", "exp.yaml"));
  CHECK(yaml.find("shape") == std::string::npos);
  CHECK(yaml.find("classes") == std::string::npos);
  CHECK(yaml.find("image_size") == std::string::npos);
  CHECK(yaml.find("augment: false") != std::string::npos);
  const std::string synthetic =
      to_yaml(parse_config("model: {name: mlp}\ndataset: {name: synthetic}\n", "exp.yaml"));
  CHECK(synthetic.find("shape: [1, 28, 28]") != std::string::npos);
  CHECK(synthetic.find("path") == std::string::npos);
}

TEST_CASE("output.trace: a switch or a window of epochs or iterations") {
  ExperimentConfig c = parse_config(kValid, "exp.yaml", {"output.trace=true"});
  CHECK(c.output.trace.enabled);
  CHECK(c.output.trace.epochs.empty());
  CHECK(to_yaml(c).find("trace: true") != std::string::npos);
  c = parse_config(kValid, "exp.yaml", {"output.trace={epochs: [2, 3]}"});
  CHECK(c.output.trace.enabled);
  CHECK(c.output.trace.epochs == std::vector<int>{2, 3});
  // The resolved file reads back as the same window.
  CHECK(to_yaml(c).find("trace: {epochs: [2, 3]}") != std::string::npos);
  CHECK(parse_config(to_yaml(c), "config.yaml").output.trace == c.output.trace);
  c = parse_config(kValid, "exp.yaml", {"output.trace={iterations: [10, 20]}"});
  CHECK(c.output.trace.iterations == std::vector<int64_t>{10, 20});
  CHECK_FALSE(parse_config(kValid, "exp.yaml").output.trace.enabled);
  c = parse_config(kValid, "exp.yaml", {"output.trace={epochs: [7, 8]}", "train.epochs=5"});
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].find("output.trace.epochs: the window starts after the last epoch "
                           "(train.epochs: 5)") != std::string::npos);

  auto problem = [](const std::string& value) {
    try {
      parse_config(kValid, "exp.yaml", {"output.trace=" + value});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(problem("{epochs: [3, 2]}").find("output.trace.epochs: the first epoch comes after") !=
        std::string::npos);
  CHECK(problem("{epochs: [1, 2], iterations: [1, 5]}")
            .find("output.trace: give `epochs` or `iterations`, not both") != std::string::npos);
  CHECK(problem("{epoch: [1, 2]}").find("output.trace.epoch: unknown key; did you mean 'epochs'") !=
        std::string::npos);
  CHECK(problem("{epochs: [0, 2]}").find("output.trace.epochs[0]") != std::string::npos);
  CHECK(problem("{epochs: [1]}").find("expected 2 entries") != std::string::npos);
  CHECK(problem("sometimes").find("output.trace") != std::string::npos);
}

TEST_CASE("settings without effect are warnings, not errors") {
  ExperimentConfig c = parse_config(kValid, "exp.yaml", {"cluster={device: cpu, tf32: true}"});
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0] ==
        "exp.yaml: cluster.tf32: has no effect on a CPU run (cluster.device: "
        "cpu) (from --set cluster={device: cpu, tf32: true})");
  c = parse_config(kValid, "exp.yaml", {"output.trace=true"});
  CHECK(c.warnings.empty());
  c = parse_config(kValid, "exp.yaml", {"cluster.threads_per_rank=100000"});
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].find("cluster.threads_per_rank: 100000 threads per rank") !=
        std::string::npos);
}

TEST_CASE("the key reference covers every section, the algorithms' and the models' keys") {
  const std::string md = config_reference();
  for (const char* key :
       {"`seed`", "`dataset.batch_size`", "`dataset.shape`", "`cluster.link.bandwidth`",
        "`cluster.stragglers[].slowdown`", "`algorithm.name`", "`algorithm.K`",
        "`algorithm.segments`", "`algorithm.sync_period`", "`optimizer.schedule.milestones`",
        "`output.trace`", "`model.hidden`", "`model.layers[].out_features`"})
    CHECK_MESSAGE(md.find("| " + std::string(key) + " |") != std::string::npos, key);
  // Every algorithm's keys are documented.
  CHECK(md.find("algorithm.topology") != std::string::npos);
  CHECK(md.find("algorithm.stale_layers") != std::string::npos);
  CHECK(md.find("algorithm.partition_cost") != std::string::npos);
  CHECK(md.find("(algorithm pipe_sgd only)") != std::string::npos);
  CHECK(md.find("(dataset synthetic only)") != std::string::npos);
}
