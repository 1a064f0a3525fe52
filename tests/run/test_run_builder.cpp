// The run builder is the one place a run is assembled: `dtrain plan` profiles the rank that
// training builds, and --dry-run / plan stand in for missing dataset files where training
// refuses to start.
#include <doctest/doctest.h>

#include <unistd.h>  // getpid: a temporary file per test process

#include <cstring>     // memcmp
#include <filesystem>  // a text file for the text dataset
#include <fstream>

#include "core/error.h"
#include "run/config.h"
#include "run/plan_command.h"  // build_plan_run
#include "run/rank_checks.h"   // check_stragglers
#include "run/run_builder.h"
#include "run/run_options.h"  // compute_slowdown

using namespace dtrain;

namespace {

void check_same_loading(const Run& a, const Run& b) {
  for (auto [x, y, run_x, run_y] : {std::tuple{&a.train_loading, &b.train_loading, &a, &b},
                                    std::tuple{&a.test_loading, &b.test_loading, &a, &b}}) {
    CHECK(x->global_batch == y->global_batch);
    CHECK(x->rank == y->rank);
    CHECK(x->world == y->world);
    CHECK(x->seed == y->seed);
    CHECK(x->shuffle == y->shuffle);
    CHECK(x->drop_last == y->drop_last);
    CHECK(x->prefetch == y->prefetch);
    CHECK(x->workers == y->workers);
    // Batches in the backend's host memory, uploaded by the loader thread to its device.
    CHECK(x->allocator == &run_x->backend->host_allocator());
    CHECK(y->allocator == &run_y->backend->host_allocator());
    CHECK(x->device == run_x->backend.get());
    CHECK(y->device == run_y->backend.get());
  }
}

}  // namespace

TEST_CASE("plan profiles the model and loaders training builds for the same config and ranks") {
  // Test batches larger than training's: the model is built for the larger local batch.
  const ExperimentConfig config = parse_config(
      "model: {name: mlp, hidden: [32]}\n"
      "dataset: {name: synthetic, shape: [1, 8, 8], classes: 4, batch_size: 32, "
      "test_batch_size: 96}\n"
      "optimizer: {freeze_layers: 1}\ncluster: {device: cpu}\n",
      "same.yaml");
  for (int ranks : {1, 2, 4}) {
    CAPTURE(ranks);
    auto planned = build_plan_run(config, ranks);
    auto trained = build_run(config, {0, ranks, 0, false});
    CHECK(planned->model_input.batch == 96 / ranks);
    CHECK(trained->model_input.batch == planned->model_input.batch);
    CHECK(trained->model_input.sample_shape == planned->model_input.sample_shape);
    CHECK(trained->model->summary() == planned->model->summary());
    CHECK(trained->model->trainable_offset() == planned->model->trainable_offset());
    const Tensor& w = trained->model->parameters();
    CHECK(std::memcmp(w.raw(), planned->model->parameters().raw(), w.bytes()) == 0);
    CHECK(trained->train_loader->local_batch() == 32 / ranks);
    CHECK(planned->train_loader->batches_per_epoch() == trained->train_loader->batches_per_epoch());
    check_same_loading(*planned, *trained);
  }
}

TEST_CASE("missing dataset files: a stand-in of the shape for dry-run and plan, exit 2 to train") {
  const ExperimentConfig config = parse_config(
      "model: {name: resnet20}\ndataset: {name: cifar100, path: /nonexistent/cifar-100}\n"
      "cluster: {device: cpu}\n",
      "cifar.yaml");
  auto run = build_run(config, {0, 1, 0, false}, DataFiles::stand_in_when_missing);
  CHECK(run->model_input.sample_shape == Shape({3, 32, 32}));
  CHECK(run->model_input.classes == 100);
  CHECK(run->train_set->size() == 50000);
  CHECK(run->train_set->describe().find("STAND-IN") != std::string::npos);
  REQUIRE(run->notes.size() == 2);
  CHECK(run->notes[0].find("datasets/README.md") != std::string::npos);
  CHECK_THROWS_WITH_AS(build_run(config, {0, 1, 0, false}, DataFiles::required),
                       doctest::Contains("datasets/README.md"), InputError);
}

TEST_CASE("a language model's input is [block_size] and its classes the vocabulary") {
  const std::string model = "model: {name: mlp, hidden: [16]}\ncluster: {device: cpu}\n";
  ExperimentConfig config = parse_config(
      model + "dataset: {name: tokens, path: /nonexistent/owt, block_size: 32, batch_size: 8}\n",
      "owt.yaml");
  auto run = build_run(config, {0, 2, 0, false}, DataFiles::stand_in_when_missing);
  CHECK(run->model_input.sample_shape == Shape({32}));
  CHECK(run->model_input.classes == 50257);
  CHECK(run->train_set->label_shape() == Shape({32}));
  CHECK(run->train_set->describe().find("STAND-IN") != std::string::npos);
  run->train_loader->start_epoch(0);
  Batch batch;
  REQUIRE(run->train_loader->next(batch));
  CHECK(batch.images.shape() == Shape({4, 32}));
  CHECK(batch.labels.shape() == Shape({4, 32}));
  CHECK(batch.rows() == 4);
  CHECK_THROWS_WITH_AS(build_run(config, {0, 1, 0, false}, DataFiles::required),
                       doctest::Contains("dataset.path: /nonexistent/owt does not exist"),
                       InputError);

  const auto file = std::filesystem::temp_directory_path() /
                    ("dtrain-test-builder-" + std::to_string(::getpid()) + ".txt");
  std::ofstream(file) << std::string(200, 'a') + std::string(100, 'b') + "c\n";
  config = parse_config(model + "dataset: {name: text, path: " + file.string() +
                            ", tokenizer: char, block_size: 16, batch_size: 4}\n",
                        "text.yaml");
  run = build_run(config, {0, 1, 0, false});
  CHECK(run->model_input.sample_shape == Shape({16}));
  CHECK(run->model_input.classes == 4);  // \n, a, b, c
  CHECK(run->train_set->vocabulary_json() == "[\n\"\\n\",\n\"a\",\n\"b\",\n\"c\"\n]\n");
  std::filesystem::remove(file);
}

TEST_CASE("the builder refuses what the config and the ranks cannot do together") {
  const ExperimentConfig config = parse_config(
      "model: {name: mlp}\ndataset: {name: synthetic, batch_size: 30}\n"
      "cluster: {device: cpu, stragglers: [{rank: 3, slowdown: 2}]}\n",
      "ranks.yaml");
  CHECK_THROWS_WITH_AS(build_run(config, {0, 4, 0, false}),
                       doctest::Contains("global batch 30 must be divisible by the 4 data-parallel "
                                         "ranks (nearest: 28 or 32)"),
                       InputError);
  CHECK_THROWS_WITH_AS(check_stragglers(config, 2),
                       doctest::Contains("cluster.stragglers[0].rank: 3, but the job has 2"),
                       InputError);
  // A plan for fewer ranks than the stragglers' builds the run (and ignores them).
  CHECK(build_plan_run(config, 2)->model_input.batch == 15);
}

TEST_CASE("cluster.stragglers slows the ranks it lists and no other") {
  // The app test (tests/app/test_mpi.sh) sees a listed rank's compute stretched in timing.csv;
  // that the others run at their own pace is this mapping (a rank whose slow-down is 1 sleeps
  // nowhere: Scheduler::emulate_straggler), checked without a clock.
  const ExperimentConfig config = parse_config(
      "model: {name: mlp}\ndataset: {name: synthetic, batch_size: 32}\n"
      "cluster: {device: cpu, stragglers: [{rank: 1, slowdown: 4}, {rank: 3, slowdown: 2.5}]}\n",
      "stragglers.yaml");
  CHECK(compute_slowdown(config, 0) == 1.0);
  CHECK(compute_slowdown(config, 1) == 4.0);
  CHECK(compute_slowdown(config, 2) == 1.0);
  CHECK(compute_slowdown(config, 3) == 2.5);
  CHECK_THROWS_WITH_AS(check_stragglers(config, 2),
                       doctest::Contains("cluster.stragglers[1].rank: 3, but the job has 2"),
                       InputError);
}

TEST_CASE("optimizer.name picks the optimizer; AdamW decays the weight matrices, not the biases") {
  const ExperimentConfig sgd = parse_config(
      "model: {name: mlp, hidden: [16]}\n"
      "dataset: {name: synthetic, shape: [1, 4, 4], classes: 3, batch_size: 8}\n"
      "cluster: {device: cpu}\n",
      "sgd.yaml");
  CHECK(build_run(sgd, {0, 1, 0, false})->optimizer->name() == "sgd");
  ExperimentConfig config = sgd;
  static_cast<OptimizerChoice&>(config.optimizer) = OptimizerChoice("adamw");
  auto run = build_run(config, {0, 1, 0, false});
  REQUIRE(run->optimizer->name() == "adamw");
  // The MLP's tensors in forward order: fc weight [16, 16], its bias, out weight [3, 16], its
  // bias: four runs, decayed and not in turn.
  std::vector<std::pair<int64_t, bool>> runs;
  for (const DecayRange& r :
       cover(decay_ranges(run->model->weight_slots()), run->model->num_parameters()))
    runs.emplace_back(r.count, r.decay);
  CHECK(runs == std::vector<std::pair<int64_t, bool>>{
                    {16 * 16, true}, {16, false}, {3 * 16, true}, {3, false}});
}
