// load_config on bad input: every problem is an InputError (exit code 2) naming the file, the
// key path and, for YAML, the line; all problems of one file come in one error.
#include <doctest/doctest.h>
#include <unistd.h>  // getpid: a temp directory per test process; access

#include <filesystem>  // temp files
#include <fstream>
#include <sstream>  // std::istringstream: splitting messages into lines

#include "core/error.h"
#include "data/text.h"    // TextOptions
#include "optim/adamw.h"  // AdamWOptions
#include "optim/sgd.h"    // SgdOptions
#include "run/config.h"

using namespace dtrain;

namespace {

struct TempConfig {
  std::filesystem::path path;
  TempConfig(const std::string& name, const std::string& text) {
    auto dir = std::filesystem::temp_directory_path() /
               ("dtrain-test-config-errors-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    path = dir / name;
    std::ofstream(path) << text;
  }
  ~TempConfig() { std::filesystem::remove(path); }
};

const char* kValid = "model: {name: mlp}\ndataset: {name: fashion_mnist}\n";

// The message of the InputError that loading `text` (plus overrides) throws; "" if none.
std::string error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  TempConfig file("bad.yaml", text);
  try {
    load_config({file.path.string(), std::move(overrides), {}});
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The problem lines of an error (the summary line dropped), with the temp directory removed so
// that tests can spell them "bad.yaml:3: ...".
std::vector<std::string> problems_of(const std::string& message) {
  std::vector<std::string> lines;
  std::istringstream in(message);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    auto at = line.find("bad.yaml");
    lines.push_back(at == std::string::npos ? line : line.substr(at));
  }
  return lines;
}

bool has_line(const std::vector<std::string>& lines, const std::string& wanted) {
  for (const auto& line : lines)
    if (line == wanted) return true;
  return false;
}

}  // namespace

TEST_CASE("a missing file, a directory and a YAML syntax error are InputErrors naming the file") {
  CHECK_THROWS_WITH_AS(load_config({"/nonexistent/x.yaml", {}, {}}),
                       "/nonexistent/x.yaml: no such config file", InputError);
  CHECK_THROWS_WITH_AS(load_config({std::filesystem::temp_directory_path().string(), {}, {}}),
                       doctest::Contains("is a directory"), InputError);

  std::string msg = error_of("model: {name: mlp}\ndataset: {name: mnist\ntrain: {epochs: 1}\n");
  INFO(msg);
  CHECK(msg.find("bad.yaml:3:") != std::string::npos);
  CHECK(msg.find("YAML syntax error") != std::string::npos);

  msg = error_of("model: {name: mlp}\n  dataset: x\n");
  CHECK(msg.find("bad.yaml:2:") != std::string::npos);
  CHECK(msg.find("YAML syntax error") != std::string::npos);

  CHECK(error_of("- a\n- b\n").find("expected a map of settings") != std::string::npos);

  TempConfig unreadable("unreadable.yaml", kValid);
  std::filesystem::permissions(unreadable.path, std::filesystem::perms::none);
  if (access(unreadable.path.c_str(), R_OK) != 0)  // root reads anything: nothing to test then
    CHECK_THROWS_WITH_AS(load_config({unreadable.path.string(), {}, {}}),
                         doctest::Contains("unreadable.yaml: cannot read the config file"),
                         InputError);
}

TEST_CASE("unknown keys are reported with the closest known key") {
  auto lines =
      problems_of(error_of("model: {name: mlp}\ndataset:\n  name: fashion_mnist\n"
                           "  batch_sise: 10\nbatch_size: 3\noptimiser: {}\nfoo: 1\n"));
  CHECK(has_line(lines, "bad.yaml:4: dataset.batch_sise: unknown key; did you mean 'batch_size'?"));
  CHECK(has_line(lines, "bad.yaml:5: batch_size: unknown key; did you mean 'dataset.batch_size'?"));
  CHECK(has_line(lines, "bad.yaml:6: optimiser: unknown key; did you mean 'optimizer'?"));
  REQUIRE(lines.size() == 4);
  CHECK(lines[3].starts_with("bad.yaml:7: foo: unknown key (known keys: "));

  lines = problems_of(error_of(std::string(kValid) + "cluster: {link: {bandwith: 1Gbps}}\n"));
  CHECK(
      has_line(lines, "bad.yaml:3: cluster.link.bandwith: unknown key; did you mean 'bandwidth'?"));
  CHECK(has_line(lines,
                 "bad.yaml:3: cluster.link.bandwidth: required: a rate such as 10Gbps "
                 "when cluster.link is given"));
}

TEST_CASE("out-of-range values, bad enum values and wrong types name key, line and value") {
  auto lines = problems_of(
      error_of("model: {name: mlp}\ndataset:\n  name: fashion_mnist\n  batch_size: -1\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "bad.yaml:4: dataset.batch_size: must be > 0, got -1");

  lines = problems_of(error_of(std::string(kValid) + "algorithm: {name: nonsense}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "bad.yaml:3: algorithm.name: expected one of sync, ps_sync, pipe_sgd, local_sgd, gossip, "
        "d_psgd, hpsgd, sapipe, pipedream, got "
        "'nonsense'");
  lines = problems_of(error_of(std::string(kValid) + "algorithm: {name: pipe_sdg}\n"));
  CHECK(lines.at(0).ends_with("got 'pipe_sdg'; did you mean 'pipe_sgd'?"));

  lines =
      problems_of(error_of("model: {name: mlp}\ndataset: {name: fashion_mnist, "
                           "batch_size: abc}\n"));
  CHECK(lines.at(0) == "bad.yaml:2: dataset.batch_size: expected an integer, got 'abc'");

  lines = problems_of(error_of(std::string(kValid) + "optimizer:\n  lr: [1]\n  momentum: 1\n"
                                                     "  nesterov: maybe\n  weight_decay: .nan\n"));
  CHECK(has_line(lines, "bad.yaml:4: optimizer.lr: expected a number, got a list"));
  CHECK(has_line(lines, "bad.yaml:5: optimizer.momentum: must be in [0, 1), got 1"));
  CHECK(has_line(lines, "bad.yaml:6: optimizer.nesterov: expected true or false, got 'maybe'"));
  CHECK(has_line(lines, "bad.yaml:7: optimizer.weight_decay: expected a number, got '.nan'"));

  lines = problems_of(error_of(std::string(kValid) + "train: {epochs: 2.5, max_iterations: ~}\n"
                                                     "seed: -4\n"));
  CHECK(has_line(lines, "bad.yaml:3: train.epochs: expected an integer, got '2.5'"));
  CHECK(
      has_line(lines, "bad.yaml:3: train.max_iterations: expected an integer, got an empty value"));
  CHECK(has_line(lines, "bad.yaml:4: seed: must be >= 0, got -4"));

  lines = problems_of(error_of(std::string(kValid) + "train: 5\n"));
  CHECK(has_line(lines, "bad.yaml:3: train: expected a map of settings, got '5'"));
}

TEST_CASE("required values and bad unit strings") {
  auto lines = problems_of(error_of("seed: 1\n"));
  CHECK(lines.size() == 2);
  CHECK(has_line(lines,
                 "bad.yaml: dataset: required: a map with at least `name`, e.g. "
                 "{name: fashion_mnist}"));
  CHECK(lines.at(0).starts_with("bad.yaml: model: required"));

  lines = problems_of(error_of("model: {hidden: [1]}\ndataset: {batch_size: 1}\n"));
  CHECK(lines.at(0).starts_with("bad.yaml:1: model: needs `name` or `layers`"));
  CHECK(problems_of(error_of("model: 5\ndataset: {name: mnist, path: /x}\n"))
            .at(0)
            .ends_with("custom `layers` list, got '5'"));
  CHECK(lines.at(1).starts_with("bad.yaml:2: dataset.name: required"));

  lines = problems_of(error_of("model: {name: mlp}\ndataset: {name: cifar10, mean: [0.5]}\n"));
  CHECK(has_line(lines,
                 "bad.yaml:2: dataset.path: required for dataset 'cifar10': the directory "
                 "holding its files"));
  CHECK(has_line(lines,
                 "bad.yaml:2: dataset.mean: needs one entry per channel: dataset "
                 "'cifar10' has 3, got 1"));

  lines = problems_of(
      error_of(std::string(kValid) + "cluster:\n  link: {bandwidth: 10Gbs, latency: soon}\n"));
  CHECK(lines.size() == 2);
  CHECK(lines.at(0).starts_with("bad.yaml:4: cluster.link.bandwidth: bad bandwidth '10Gbs'"));
  CHECK(lines.at(1).starts_with("bad.yaml:4: cluster.link.latency: bad duration 'soon'"));

  lines = problems_of(error_of(std::string(kValid) + "cluster: {memory_per_rank: 20Gb}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines.at(0).starts_with("bad.yaml:3: cluster.memory_per_rank: bad size '20Gb'"));
  lines = problems_of(error_of(kValid, {"cluster.memory_per_rank=0MB"}));
  CHECK(has_line(lines,
                 "bad.yaml: cluster.memory_per_rank: bad size '0MB': must be at least 1 byte "
                 "(from --set cluster.memory_per_rank=0MB)"));

  lines = problems_of(error_of(std::string(kValid) +
                               "cluster: {stragglers: [{rank: 1, slowdown: 0.5}, {rank: 1, "
                               "slowdown: 2}, {slowdown: 3}, 7]}\n"));
  CHECK(has_line(lines, "bad.yaml:3: cluster.stragglers[0].slowdown: must be >= 1, got 0.5"));
  CHECK(has_line(
      lines, "bad.yaml:3: cluster.stragglers[1].rank: rank 1 is already listed as stragglers[0]"));
  CHECK(has_line(lines, "bad.yaml:3: cluster.stragglers[2].rank: required: the rank to slow down"));
  CHECK(has_line(lines, "bad.yaml:3: cluster.stragglers[3]: expected a map, got '7'"));
}

TEST_CASE("rules between settings") {
  auto lines =
      problems_of(error_of(std::string(kValid) + "optimizer: {schedule: {name: multistep}}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "bad.yaml:3: optimizer.schedule.milestones: required for schedule "
        "'multistep': a non-empty list of epochs");

  lines = problems_of(error_of(std::string(kValid) +
                               "optimizer: {schedule: {name: multistep, milestones: [5, 5]}}\n"));
  CHECK(lines.at(0) ==
        "bad.yaml:3: optimizer.schedule.milestones[1]: milestones must increase: "
        "5 follows 5");

  lines = problems_of(error_of(std::string(kValid) + "optimizer: {nesterov: true, momentum: 0}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "bad.yaml:3: optimizer.nesterov: needs momentum > 0 and dampening 0, got "
        "momentum 0 and dampening 0");
  // A momentum that is wrong by itself is reported once, not again by the nesterov rule.
  lines = problems_of(error_of(std::string(kValid) + "optimizer: {nesterov: true, momentum: x}\n"));
  CHECK(lines.size() == 1);

  lines = problems_of(error_of(std::string(kValid) +
                               "optimizer: {lr: 0.1, schedule: {name: cosine, min_lr: 0.5}}\n"));
  CHECK(lines.at(0).starts_with("bad.yaml:3: optimizer.schedule.min_lr: must be <= optimizer.lr"));

  lines =
      problems_of(error_of("model: {name: mlp}\ndataset: {name: synthetic, shape: [3, 4], "
                           "std: [1, 0]}\n"));
  CHECK(has_line(lines, "bad.yaml:2: dataset.shape: expected 3 entries, got 2"));
  CHECK(has_line(lines, "bad.yaml:2: dataset.std[1]: must be > 0, got 0"));
}

TEST_CASE("all problems of a file come in one error, in file order, after a summary") {
  std::string msg = error_of(R"(model: {name: mlp}
dataset:
  name: fashion_mnist
  batch_size: -1
algorithm: {name: nonsense}
train:
  epochs: zero
  evall_every_epochs: 1
)");
  auto first = msg.substr(0, msg.find('\n'));
  CHECK(first.ends_with("bad.yaml: 4 problems"));
  auto lines = problems_of(msg);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].starts_with("bad.yaml:4: dataset.batch_size:"));
  CHECK(lines[1].starts_with("bad.yaml:5: algorithm.name:"));
  CHECK(lines[2].starts_with("bad.yaml:7: train.epochs:"));
  CHECK(lines[3].starts_with("bad.yaml:8: train.evall_every_epochs: unknown key"));

  msg =
      error_of("model: {name: mlp}\ndataset: {name: mnist, path: /x}\ndataset: {name: cifar10}\n");
  CHECK(msg.find("bad.yaml:3: dataset: duplicate key (first given on line 2)") !=
        std::string::npos);
}

TEST_CASE("--set: values are validated like file values and say where they came from") {
  auto lines = problems_of(error_of(kValid, {"dataset.batch_size=0"}));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "bad.yaml: dataset.batch_size: must be > 0, got 0 (from --set dataset.batch_size=0)");

  lines = problems_of(error_of(kValid, {"foo.bar=1", "dataset.batch_sise=3"}));
  CHECK(has_line(
      lines,
      "bad.yaml: foo: unknown key (known keys: algorithm, checkpoint, cluster, compression, "
      "dataset, model, name, optimizer, output, seed, train) (from --set "
      "foo.bar=1)"));
  CHECK(has_line(lines,
                 "bad.yaml: dataset.batch_sise: unknown key; did you mean 'batch_size'? "
                 "(from --set dataset.batch_sise=3)"));

  lines = problems_of(error_of(kValid, {"cluster.link.latency=1ms"}));
  CHECK(has_line(lines,
                 "bad.yaml: cluster.link.bandwidth: required: a rate such as 10Gbps when "
                 "cluster.link is given (from --set cluster.link.latency=1ms)"));

  lines = problems_of(
      error_of(kValid, {"train.epochs=abc", "optimizer.nesterov=yes", "optimizer.momentum=0"}));
  CHECK(has_line(lines,
                 "bad.yaml: train.epochs: expected an integer, got 'abc' (from --set "
                 "train.epochs=abc)"));
  CHECK(has_line(lines,
                 "bad.yaml: optimizer.nesterov: needs momentum > 0 and dampening 0, got "
                 "momentum 0 and dampening 0 (from --set optimizer.nesterov=yes)"));
}

TEST_CASE("malformed --set items are InputErrors") {
  TempConfig file("set.yaml", kValid);
  auto load = [&](std::string item) { load_config({file.path.string(), {item}, {}}); };
  CHECK_THROWS_WITH_AS(load("train.epochs"), doctest::Contains("expected KEY=VALUE"), InputError);
  CHECK_THROWS_WITH_AS(load("=3"), doctest::Contains("the KEY before '=' is empty"), InputError);
  CHECK_THROWS_WITH_AS(load("train..epochs=3"), doctest::Contains("not a dotted key path"),
                       InputError);
  CHECK_THROWS_WITH_AS(load("train.epochs=[1"), doctest::Contains("not valid YAML"), InputError);
  CHECK_THROWS_WITH_AS(load("cluster.stragglers[2].rank=1"), doctest::Contains("no list to index"),
                       InputError);
}

TEST_CASE("language-model dataset keys: required, bounded, and only for their datasets") {
  const std::string model = "model: {name: mlp}\n";
  auto lines = problems_of(error_of(model + "dataset: {name: text}\n"));
  CHECK(has_line(lines,
                 "bad.yaml:2: dataset.block_size: required: the tokens per sample, e.g. "
                 "256"));
  CHECK(has_line(lines, "bad.yaml:2: dataset.path: required for dataset 'text': the text file"));
  lines = problems_of(error_of(model + "dataset: {name: tokens}\n"));
  CHECK(has_line(lines,
                 "bad.yaml:2: dataset.block_size: required: the tokens per sample, e.g. "
                 "256"));
  CHECK(has_line(lines,
                 "bad.yaml:2: dataset.path: required for dataset 'tokens': the directory "
                 "holding its files"));

  lines = problems_of(error_of(model + "dataset: {name: text, path: a.txt, block_size: 0, "
                                       "valid_fraction: 1, tokenizer: bpe}\n"));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].starts_with("bad.yaml:2: dataset.block_size: must be > 0, got 0"));
  CHECK(lines[1].starts_with("bad.yaml:2: dataset.tokenizer: "));
  CHECK(lines[2].starts_with("bad.yaml:2: dataset.valid_fraction: must be "));
  CHECK(problems_of(error_of(model + "dataset: {name: text, path: a.txt, block_size: 8, "
                                     "valid_fraction: 0}\n"))
            .at(0)
            .starts_with("bad.yaml:2: dataset.valid_fraction: must be "));
  lines = problems_of(
      error_of(model + "dataset: {name: tokens, path: d, block_size: 8, vocab_size: 70000}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("bad.yaml:2: dataset.vocab_size: must be "));

  // Each key applies only to its datasets.
  lines = problems_of(error_of(model + "dataset: {name: fashion_mnist, block_size: 8}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("bad.yaml:2: dataset.block_size: "));
  CHECK(lines[0].find("applies only to dataset text or tokens, not to 'fashion_mnist'") !=
        std::string::npos);
  for (const char* key : {"tokenizer: char", "valid_fraction: 0.2"}) {
    CAPTURE(key);
    lines = problems_of(
        error_of(model + "dataset: {name: tokens, path: d, block_size: 8, " + key + "}\n"));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("applies only to dataset text, not to 'tokens'") != std::string::npos);
  }
  lines = problems_of(
      error_of(model + "dataset: {name: text, path: a, block_size: 8, vocab_size: 100}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("bad.yaml:2: dataset.vocab_size: "));
  lines = problems_of(
      error_of(model + "dataset: {name: text, path: a, block_size: 8, augment: true}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("bad.yaml:2: dataset.augment: "));

  // Valid: the defaults fill in.
  TempConfig file("text.yaml", model + "dataset: {name: text, path: a.txt, block_size: 64}\n");
  const ExperimentConfig c = load_config({file.path.string(), {}, {}});
  CHECK(c.dataset.get<TextOptions>().block_size == 64);
  CHECK(c.dataset.get<TextOptions>().tokenizer == "byte");
  CHECK(c.dataset.get<TextOptions>().valid_fraction == 0.1);
  const std::string resolved = to_yaml(c);
  CHECK(resolved.find("tokenizer: byte") != std::string::npos);
  CHECK(resolved.find("valid_fraction: 0.1") != std::string::npos);
  CHECK(resolved.find("vocab_size") == std::string::npos);
}

TEST_CASE("optimizer keys of the other optimizer, bad betas, refused algorithms and clipping") {
  auto lines = problems_of(
      error_of(std::string(kValid) + "optimizer: {name: adamw, momentum: 0.9, nesterov: true}\n"));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] ==
        "bad.yaml:3: optimizer.momentum: applies only to optimizer sgd, not to 'adamw'");
  CHECK(lines[1] ==
        "bad.yaml:3: optimizer.nesterov: applies only to optimizer sgd, not to 'adamw'");

  lines = problems_of(error_of(std::string(kValid) + "optimizer: {betas: [0.9, 0.99], eps: 1}\n"));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] ==
        "bad.yaml:3: optimizer.betas: applies only to optimizer adamw or lion, not to 'sgd'");
  CHECK(lines[1] == "bad.yaml:3: optimizer.eps: applies only to optimizer adamw, not to 'sgd'");

  lines = problems_of(error_of(std::string(kValid) + "optimizer: {name: adamw, betas: [0.9]}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "bad.yaml:3: optimizer.betas: expected 2 entries, got 1");
  lines =
      problems_of(error_of(std::string(kValid) + "optimizer: {name: adamw, betas: [0.9, 1]}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("bad.yaml:3: optimizer.betas[1]: must be"));
  lines = problems_of(error_of(std::string(kValid) + "optimizer: {name: adamw, eps: 0}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "bad.yaml:3: optimizer.eps: must be > 0, got 0");
  lines = problems_of(error_of(std::string(kValid) + "optimizer: {clip_grad_norm: -1}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "bad.yaml:3: optimizer.clip_grad_norm: must be >= 0, got -1");

  // train.accumulation_steps: at least 1, dividing the batch into equal micro-batches, and not
  // where a model-parallel algorithm splits the minibatch its own way.
  lines = problems_of(error_of(std::string(kValid) + "train: {accumulation_steps: 0}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("bad.yaml:3: train.accumulation_steps: must be >= 1, got 0"));
  lines = problems_of(error_of(std::string(kValid) + "train: {accumulation_steps: 7}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(
      lines[0].starts_with("bad.yaml:3: train.accumulation_steps: 7 does not divide "
                           "dataset.batch_size"));
  lines = problems_of(error_of(std::string(kValid) +
                               "train: {accumulation_steps: 2}\nalgorithm: {name: pipedream}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with(
      "bad.yaml:3: train.accumulation_steps: algorithm pipedream splits its minibatch"));

  lines = problems_of(error_of(
      std::string(kValid) + "optimizer: {schedule: {warmup_epochs: 1, warmup_iterations: 10}}\n"));
  REQUIRE(lines.size() == 1);
  CHECK(
      lines[0].starts_with("bad.yaml:3: optimizer.schedule.warmup_iterations: give "
                           "warmup_epochs (1) or warmup_iterations (10), not both"));
}

TEST_CASE("adamw's defaults: PyTorch's betas, eps and weight decay 0.01; sgd keeps 0") {
  for (const char* algorithm : {"sync", "pipe_sgd", "ps_sync", "local_sgd", "d_psgd", "gossip"}) {
    CAPTURE(algorithm);
    // Each of them clips (optimizer.clip_grad_norm) as well.
    TempConfig file("good.yaml", std::string(kValid) +
                                     "optimizer: {name: adamw, clip_grad_norm: 1}\n"
                                     "algorithm: {name: " +
                                     algorithm + "}\n");
    const ExperimentConfig c = load_config({file.path.string(), {}, {}});
    CHECK(c.optimizer.name == "adamw");
    CHECK(c.optimizer.get<AdamWOptions>().betas == std::vector<double>{0.9, 0.999});
    CHECK(c.optimizer.get<AdamWOptions>().eps == 1e-8);
    CHECK(c.optimizer.get<AdamWOptions>().weight_decay == 0.01);
  }
  TempConfig file("good.yaml", kValid);
  CHECK(load_config({file.path.string(), {}, {}}).optimizer.get<SgdOptions>().weight_decay == 0.0);
}

TEST_CASE(
    "model.recompute: blocks on a model without blocks, or a bad value, is exit 2 naming it") {
  auto lines =
      problems_of(error_of("model: {name: mlp, recompute: blocks}\n"
                           "dataset: {name: fashion_mnist}\n"));
  CHECK(has_line(lines,
                 "bad.yaml:1: model.recompute: blocks: model 'mlp' has no blocks to "
                 "recompute (the gpt, gpt2 and ResNet models have; a `layers:` list marks "
                 "them with `block:`)"));
  lines = problems_of(error_of(kValid, {"model.recompute=always"}));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("model.recompute: expected one of none, blocks, got 'always'") !=
        std::string::npos);
  CHECK(
      error_of("model: {name: resnet20, recompute: blocks}\ndataset: {name: synthetic}\n").empty());
}
