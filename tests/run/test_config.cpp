// load_config on valid input: values, defaults, --set, --out, the model hook, to_yaml round trip.
#include <doctest/doctest.h>
#include <unistd.h>  // getpid: a temp directory per test process

#include <filesystem>  // temp files
#include <fstream>
#include <sstream>  // std::istringstream: splitting messages into lines

#include "core/error.h"
#include "data/dataset_table.h"  // dataset_defaults
#include "data/imagefolder.h"    // ImageFolderOptions
#include "data/synthetic.h"      // SyntheticOptions
#include "optim/sgd.h"           // SgdOptions
#include "run/config.h"
#include "sched/local_sgd_scheduler.h"  // LocalSgdOptions
#include "sched/pipe_sgd_scheduler.h"   // PipeSgdOptions
#include "sched/sync_scheduler.h"       // SyncOptions

using namespace dtrain;

namespace {

// A config file in a per-process temp directory, removed again at scope exit.
struct TempConfig {
  std::filesystem::path path;
  TempConfig(const std::string& name, const std::string& text) {
    auto dir =
        std::filesystem::temp_directory_path() / ("dtrain-test-config-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    path = dir / name;
    std::ofstream(path) << text;
  }
  ~TempConfig() { std::filesystem::remove(path); }
  ConfigSources sources() const { return {path.string(), {}, {}}; }
};

const char* kFull = R"(name: fashion_mlp_pipesgd
seed: 7
model:       {name: mlp, hidden: [500, 500]}
dataset:     {name: fashion_mnist, path: /data/fashion, batch_size: 128}
cluster:
  device: cpu
  threads_per_rank: 2
  link: {bandwidth: 10Gbps, latency: 20us}
  stragglers: [{rank: 1, slowdown: 10}]
algorithm:   {name: pipe_sgd, K: 3, warmup_epochs: 1}
compression: {name: quantize8}
optimizer:   {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0005, schedule: {name: step, every_epochs: 30, gamma: 0.1}}
train:       {epochs: 5, eval_every_epochs: 1}
output:      {dir: runs/fashion_mlp_pipesgd, trace: true}
)";

}  // namespace

TEST_CASE("a full config loads with its values and the documented defaults") {
  TempConfig file("full.yaml", kFull);
  ExperimentConfig c = load_config(file.sources());
  CHECK(c.name == "fashion_mlp_pipesgd");
  CHECK(c.seed == 7);
  CHECK(c.source_path == file.path.string());
  REQUIRE(c.model.IsMap());
  CHECK(c.model["name"].as<std::string>() == "mlp");
  CHECK(c.model["hidden"][1].as<int>() == 500);

  CHECK(c.dataset.name == "fashion_mnist");
  CHECK(c.dataset.path == "/data/fashion");
  CHECK(c.dataset.batch_size == 128);
  CHECK(c.dataset.test_batch_size == 128);  // defaults to batch_size
  CHECK(c.dataset.prefetch == 2);
  CHECK_FALSE(c.dataset.augment);
  // The other datasets' keys have their documented defaults in their own options.
  const DatasetConfig synthetic = dataset_defaults("synthetic");
  CHECK(synthetic.get<SyntheticOptions>().shape == std::vector<int>{1, 28, 28});
  CHECK(synthetic.get<SyntheticOptions>().classes == 10);
  const DatasetConfig folder = dataset_defaults("imagefolder");
  CHECK(folder.get<ImageFolderOptions>().image_size == 224);
  CHECK(folder.get<ImageFolderOptions>().resize == 256);
  CHECK(c.dataset.mean.empty());

  CHECK(c.cluster.device == "cpu");
  CHECK(c.cluster.threads_per_rank == 2);
  REQUIRE(c.cluster.link);
  CHECK(c.cluster.link->bandwidth.bytes_per_s == doctest::Approx(1.25e9));
  CHECK(c.cluster.link->latency.seconds == doctest::Approx(20e-6));
  CHECK(c.cluster.link->bandwidth.text == "10Gbps");
  REQUIRE(c.cluster.stragglers.size() == 1);
  CHECK(c.cluster.stragglers[0].rank == 1);
  CHECK(c.cluster.stragglers[0].slowdown == 10);

  CHECK(c.algorithm.name == "pipe_sgd");
  CHECK(c.algorithm.get<PipeSgdOptions>().K == 3);
  CHECK(c.algorithm.get<PipeSgdOptions>().warmup_epochs == 1);
  CHECK(c.algorithm.get<PipeSgdOptions>().segments == 1);
  CHECK(c.compression.name == "quantize8");
  CHECK(c.optimizer.lr == 0.05);
  CHECK(c.optimizer.get<SgdOptions>().weight_decay == 0.0005);
  CHECK(c.optimizer.get<SgdOptions>().dampening == 0);
  CHECK_FALSE(c.optimizer.get<SgdOptions>().nesterov);
  CHECK(c.optimizer.schedule.name == "step");
  CHECK(c.optimizer.schedule.every_epochs == 30);
  CHECK(c.optimizer.schedule.warmup_start_factor == 0.1);
  CHECK(c.train.epochs == 5);
  CHECK(c.train.max_iterations == 0);
  CHECK(c.output.dir == "runs/fashion_mlp_pipesgd");
  CHECK(c.output.trace.enabled);
}

TEST_CASE("a minimal config gets every default") {
  TempConfig file("minimal_exp.yaml", "model: {name: mlp}\ndataset: {name: fashion_mnist}\n");
  ExperimentConfig c = load_config(file.sources());
  CHECK(c.name == "minimal_exp");  // the file's stem
  CHECK(c.seed == 1);
  CHECK(c.dataset.path == "/usr/share/datasets/fashion-mnist");
  CHECK(c.dataset.batch_size == 100);
  CHECK(c.dataset.test_batch_size == 100);
  CHECK(c.cluster == ClusterConfig{});
  CHECK_FALSE(c.cluster.link);
  CHECK(c.algorithm == AlgorithmConfig{});
  CHECK(c.algorithm.name == "sync");
  CHECK(c.algorithm.get<SyncOptions>().segments.is("auto"));
  CHECK(c.compression.name == "none");
  CHECK(c.optimizer == OptimizerConfig{});
  CHECK(c.train == TrainConfig{});
  CHECK(c.output.dir == "runs/minimal_exp");
  CHECK_FALSE(c.output.trace.enabled);
}

TEST_CASE("synthetic data, custom layers and every optional key") {
  TempConfig file("synthetic.yaml", R"(
model:
  layers:
    - {name: flat, type: flatten}
    - {name: fc, type: linear, out_features: 100}
dataset:
  name: synthetic
  shape: [3, 32, 32]
  classes: 100
  train_size: 1024
  test_size: 256
  batch_size: 64
  test_batch_size: 256
  mean: [0.5, 0.5, 0.5]
  std: [0.25, 0.25, 0.25]
  prefetch: 0
cluster: {link: {bandwidth: 1.5GBps}, stragglers: [{rank: 0, slowdown: 1.5}, {rank: 3, slowdown: 4}]}
algorithm: {name: local_sgd, sync_period: 4}
optimizer:
  lr: 1e-3
  momentum: 0.95
  nesterov: true
  freeze_layers: 2
  schedule: {name: multistep, milestones: [30, 60, 90], gamma: 0.5, warmup_epochs: 0.5}
train: {max_iterations: 100, log_every_iterations: 10}
)");
  ExperimentConfig c = load_config(file.sources());
  CHECK(c.model["layers"].size() == 2);
  CHECK(c.dataset.get<SyntheticOptions>().shape == std::vector<int>{3, 32, 32});
  CHECK(c.dataset.get<SyntheticOptions>().classes == 100);
  CHECK(c.dataset.train_size == 1024);
  CHECK(c.dataset.test_batch_size == 256);
  CHECK(c.dataset.std == std::vector<double>{0.25, 0.25, 0.25});
  CHECK(c.dataset.prefetch == 0);
  CHECK(c.cluster.link->bandwidth.bytes_per_s == doctest::Approx(1.5e9));
  CHECK(c.cluster.link->latency.seconds == 0);
  CHECK(c.algorithm.get<LocalSgdOptions>().sync_period == 4);
  CHECK(c.cluster.stragglers.size() == 2);
  CHECK(c.optimizer.lr == 1e-3);
  CHECK(c.optimizer.get<SgdOptions>().nesterov);
  CHECK(c.optimizer.freeze_layers == 2);
  CHECK(c.optimizer.schedule.milestones == std::vector<int>{30, 60, 90});
  CHECK(c.optimizer.schedule.warmup_epochs == 0.5);
  CHECK(c.train.max_iterations == 100);
}

TEST_CASE("--set overrides any key, parsed as YAML, and --out wins over output.dir") {
  TempConfig file("overrides.yaml", kFull);
  ConfigSources sources = file.sources();
  sources.overrides = {"train.epochs=1",
                       "model.hidden=[256, 256]",
                       "cluster.link.bandwidth=1Gbps",
                       "optimizer.lr=1e-3",
                       "output.trace=false",
                       "dataset={name: synthetic, shape: [3, 8, 8], batch_size: 16}",
                       "cluster.stragglers[0].slowdown=2",
                       "optimizer.schedule={name: cosine, min_lr: 0.0001}",
                       " seed = 42"};
  sources.output_dir = "/tmp/elsewhere";
  ExperimentConfig c = load_config(sources);
  CHECK(c.train.epochs == 1);
  CHECK(c.model["hidden"].size() == 2);
  CHECK(c.model["hidden"][0].as<int>() == 256);
  CHECK(c.model["name"].as<std::string>() == "mlp");  // siblings survive
  CHECK(c.cluster.link->bandwidth.bytes_per_s == doctest::Approx(1.25e8));
  CHECK(c.cluster.link->latency.seconds == doctest::Approx(20e-6));
  CHECK(c.optimizer.lr == 1e-3);
  CHECK_FALSE(c.output.trace.enabled);
  CHECK(c.dataset.get<SyntheticOptions>().shape == std::vector<int>{3, 8, 8});
  CHECK(c.cluster.stragglers[0].slowdown == 2);
  CHECK(c.optimizer.schedule.name == "cosine");
  CHECK(c.optimizer.schedule.min_lr == 0.0001);
  CHECK(c.optimizer.schedule.every_epochs == 30);  // the whole map was replaced
  CHECK(c.seed == 42);
  CHECK(c.output.dir == "/tmp/elsewhere");
}

TEST_CASE("--set creates the maps it needs") {
  TempConfig file("create.yaml", "model: {name: mlp}\n");
  ConfigSources sources = file.sources();
  sources.overrides = {"dataset.name=synthetic", "cluster.link.latency=1ms",
                       "cluster.link.bandwidth=100Mbps"};
  ExperimentConfig c = load_config(sources);
  CHECK(c.dataset.name == "synthetic");
  CHECK(c.cluster.link->bandwidth.bytes_per_s == doctest::Approx(12.5e6));
  CHECK(c.cluster.link->latency.seconds == doctest::Approx(1e-3));
}

TEST_CASE("to_yaml → load_config round trip gives the same experiment") {
  auto check_round_trip = [](const std::string& text, std::vector<std::string> overrides) {
    TempConfig file("trip_in.yaml", text);
    ConfigSources sources = file.sources();
    sources.overrides = std::move(overrides);
    ExperimentConfig a = load_config(sources);
    std::string yaml = to_yaml(a);
    TempConfig again("trip_out.yaml", yaml);
    ExperimentConfig b = load_config(again.sources());
    CHECK(b.name == a.name);
    CHECK(b.seed == a.seed);
    CHECK(YAML::Dump(b.model) == YAML::Dump(a.model));
    CHECK(b.dataset == a.dataset);
    CHECK(b.cluster == a.cluster);
    CHECK(b.algorithm == a.algorithm);
    CHECK(b.compression == a.compression);
    CHECK(b.optimizer == a.optimizer);
    CHECK(b.train == a.train);
    CHECK(b.output == a.output);
    CHECK(to_yaml(b).substr(to_yaml(b).find('\n')) == yaml.substr(yaml.find('\n')));
    return yaml;
  };
  std::string yaml = check_round_trip(kFull, {"optimizer.lr=0.1", "optimizer.momentum=0.3"});
  // Every default is visible, in the user's spelling where there is one.
  CHECK(yaml.find("test_batch_size: 128") != std::string::npos);
  CHECK(yaml.find("prefetch: 2") != std::string::npos);
  CHECK(yaml.find("lr: 0.1\n") != std::string::npos);
  CHECK(yaml.find("bandwidth: 10Gbps") != std::string::npos);
  CHECK(yaml.find("warmup_start_factor: 0.1") != std::string::npos);
  CHECK(yaml.find("every_epochs: 30") != std::string::npos);
  // Keys that do not apply are left out: the step schedule has no milestones, a file dataset
  // no synthetic shape.
  CHECK(yaml.find("milestones") == std::string::npos);
  CHECK(yaml.find("shape:") == std::string::npos);

  check_round_trip("model: {name: mlp}\ndataset: {name: synthetic, mean: [0.1], std: [0.3]}\n", {});
  check_round_trip(
      "name: '123'\nmodel: {layers: [{name: fc, type: linear, out_features: 3}]}\n"
      "dataset: {name: cifar10, path: 'a: b'}\n"
      "optimizer: {lr: 1e-7, schedule: {name: multistep, milestones: [1, 2]}}\n"
      "cluster: {stragglers: [{rank: 2, slowdown: 1.25}]}\n",
      {});
  // cluster.precision is read as its dtype and written back as its word; layers without names
  // are written with their default names.
  yaml = check_round_trip(
      "model: {layers: [{type: flatten}, {type: linear, out_features: 3}]}\n"
      "dataset: {name: synthetic}\ncluster: {precision: bf16}\n",
      {});
  CHECK(yaml.find("precision: bf16") != std::string::npos);
  CHECK(yaml.find("- name: linear1\n      type: linear") != std::string::npos);
  TempConfig bf16("bf16.yaml", "model: {name: mlp}\ndataset: {name: synthetic}\n");
  ConfigSources sources = bf16.sources();
  CHECK(load_config(sources).cluster.precision == DType::f32);
  sources.overrides = {"cluster.precision=bf16"};
  CHECK(load_config(sources).cluster.precision == DType::bf16);
}

TEST_CASE("to_table lists every resolved setting in two columns") {
  TempConfig file("table.yaml", kFull);
  std::string table = to_table(load_config(file.sources()));
  CHECK(table.find("dataset.test_batch_size") != std::string::npos);
  CHECK(table.find("optimizer.schedule.gamma") != std::string::npos);
  CHECK(table.find("model.hidden") != std::string::npos);
  CHECK(table.find("[500, 500]") != std::string::npos);
  CHECK(table.find("cluster.stragglers[0]") != std::string::npos);
  CHECK(table.find("10Gbps (1.25e+09 bytes/s)") != std::string::npos);
  // Values start in one column.
  size_t column = std::string::npos;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    size_t gap = line.find("  ");
    REQUIRE(gap != std::string::npos);
    size_t value = line.find_first_not_of(' ', gap);
    if (column == std::string::npos) column = value;
    CHECK(value == column);
  }
}

TEST_CASE("the model is checked by the same engine: defaults filled, problems merged") {
  TempConfig file("model.yaml", R"(model:
  name: mlp
  hidden: [500, -3]
dataset: {name: fashion_mnist, batch_size: 0}
)");
  ConfigSources sources = file.sources();
  try {
    load_config(sources);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    std::string msg = e.what();
    CHECK(msg.find(": 2 problems") != std::string::npos);
    CHECK(msg.find("model.yaml:3: model.hidden[1]: must be > 0, got -3\n") != std::string::npos);
    CHECK(msg.find("model.yaml:4: dataset.batch_size: must be > 0, got 0") != std::string::npos);
  }

  sources.overrides = {"model={name: resnet20}", "dataset.batch_size=10"};
  ExperimentConfig c = load_config(sources);
  CHECK(c.model["shortcut"].as<std::string>() == "A");  // the zoo default, visible
  CHECK(to_yaml(c).find("shortcut: A") != std::string::npos);

  // Problems in values from --set name the item rather than a line.
  sources.overrides = {"model.hidden=[8, 0]", "dataset.batch_size=10"};
  CHECK_THROWS_WITH_AS(
      load_config(sources),
      doctest::Contains(
          "model.yaml: model.hidden[1]: must be > 0, got 0 (from --set model.hidden=[8, 0])"),
      InputError);
  // An unknown key inside model: is named, with the closest known one.
  sources.overrides = {"model.hiden=[8]", "dataset.batch_size=10"};
  CHECK_THROWS_WITH_AS(
      load_config(sources),
      doctest::Contains("model.yaml: model.hiden: unknown key; did you mean 'hidden'?"),
      InputError);
}

TEST_CASE("model.init_from is read beside the model, kept apart from it and written back") {
  const std::string data = "dataset: {name: synthetic}\n";
  for (const std::string model : {"model: {name: mlp, init_from: w.safetensors}\n",
                                  "model: {init_from: w.safetensors, layers: [{name: fc, type: "
                                  "linear, out_features: 3}]}\n"}) {
    CAPTURE(model);
    TempConfig file("init_from.yaml", model + data);
    const ExperimentConfig c = load_config(file.sources());
    CHECK(c.init_from == "w.safetensors");
    CHECK(!c.model["init_from"].IsDefined());  // the network's description only
    const std::string yaml = to_yaml(c);
    CHECK(yaml.find("init_from: w.safetensors") != std::string::npos);
    TempConfig again("init_from_out.yaml", yaml);
    CHECK(load_config(again.sources()).init_from == "w.safetensors");
  }
  TempConfig none("plain.yaml", "model: {name: mlp}\n" + data);
  const ExperimentConfig c = load_config(none.sources());
  CHECK(c.init_from.empty());
  CHECK(to_yaml(c).find("init_from") == std::string::npos);
  // An empty value is an error at its key, as any key's.
  ConfigSources sources = none.sources();
  sources.overrides = {"model.init_from=", "model.init_frm=x"};
  try {
    load_config(sources);
    FAIL("loaded");
  } catch (const InputError& e) {
    const std::string message = e.what();
    CHECK(message.find("model.init_from: expected a string, got an empty value") !=
          std::string::npos);
    CHECK(message.find("model.init_frm") != std::string::npos);  // still an unknown key
  }
}
