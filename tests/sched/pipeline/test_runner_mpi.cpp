// The pipeline interpreter on 2 and 4 ranks, one stage per rank: with one minibatch in the
// pipeline at a time (gpipe or 1f1b_flush with one microbatch, 1f1b with in_flight 1) every
// stage ends with exactly the weights of the same layers trained whole on one rank.
#include <doctest/doctest.h>

#include <cmath>  // isfinite
#include <cstring>
#include <vector>

#include "comm/mpi_comm.h"
#include "core/rng.h"
#include "nn/model.h"
#include "optim/sgd.h"  // make_sgd: the stages' and the reference's optimizer
#include "sched/pipeline/runner.h"

using namespace dtrain;

namespace {

constexpr int64_t kRows = 8;
const ModelInput kInput{{1, 6, 6}, 3, kRows};

Batch batch_of(int b) {
  Batch batch;
  batch.images = Tensor::empty({kRows, 1, 6, 6});
  batch.labels = Tensor::empty({kRows}, DType::i32);
  float* x = batch.images.data<float>();
  for (int64_t i = 0; i < batch.images.numel(); ++i)
    x[i] = 2.0f * random_uniform(11, static_cast<uint64_t>(b), static_cast<uint64_t>(i)) - 1.0f;
  for (int64_t i = 0; i < kRows; ++i)
    batch.labels.data<int32_t>()[i] = static_cast<int32_t>((b + i) % 3);
  return batch;
}

// The MLP every test trains, and its cut into S stages at its last S − 1 cut points.
YAML::Node mlp() {
  return YAML::Load("{name: mlp, hidden: [16, 16]}");
}
std::vector<StageSlice> mlp_stages(int S) {
  const std::vector<std::string> points = model_cut_points(mlp(), kInput);  // fc1, fc2, fc3
  REQUIRE(static_cast<int>(points.size()) >= S - 1);
  return split_model(mlp(), kInput, {points.end() - (S - 1), points.end()});
}

}  // namespace

TEST_CASE("a pipeline with one minibatch in flight trains exactly as the whole model") {
  auto world = make_mpi_comm();
  const int S = world->size(), rank = world->rank();
  auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  const YAML::Node spec = mlp();
  const std::vector<StageSlice> stages = mlp_stages(S);
  const SgdOptions sgd_options{0.9f, 0.0f, 1e-4f, false};
  constexpr int kSteps = 5;
  constexpr float kLr = 0.1f;

  // The reference: the whole model on this rank, minibatch after minibatch.
  auto whole = build_model(*backend, spec, kInput, 4);
  auto whole_sgd_owner = make_sgd(*backend, whole->parameters(), whole->gradients(), sgd_options);
  Optimizer& whole_sgd = *whole_sgd_owner;
  for (int b = 0; b < kSteps; ++b) {
    const Batch batch = batch_of(b);
    whole->forward(batch.images, batch.labels);
    whole->backward(1.0f / kRows);
    whole_sgd.step(kLr);
  }
  const float* expected = whole->parameters().data<float>() + stages[rank].first_parameter;

  pipeline::PipelineShape shape{std::vector<int>(static_cast<size_t>(S), 1)};
  for (const pipeline::ScheduleSpec& spec_ :
       {pipeline::ScheduleSpec{pipeline::ScheduleKind::gpipe, kSteps, 1, 0},
        pipeline::ScheduleSpec{pipeline::ScheduleKind::one_f_one_b_flush, kSteps, 1, 0},
        pipeline::ScheduleSpec{pipeline::ScheduleKind::one_f_one_b, kSteps, 1, 1}}) {
    CAPTURE(spec_.kind);
    const int slots = pipeline::in_flight_bound(shape, spec_, shape.stage_of(rank));
    StageModel stage(*backend, stages[rank], kInput, 4, slots, rank == 0, rank == S - 1);
    auto sgd_owner = make_sgd(*backend, stage.parameters(), stage.gradients(), sgd_options);
    Optimizer& sgd = *sgd_owner;
    PipelineRunner runner(*world, shape, stage, sgd, kRows);
    const auto schedule = pipeline::build_schedule(shape, spec_);
    runner.run(schedule[rank], spec_, batch_of, kLr, 1.0f / kRows);
    CHECK(stage.num_parameters() == stages[rank].parameters);
    CHECK(std::memcmp(stage.parameters().data<float>(), expected,
                      stage.num_parameters() * sizeof(float)) == 0);
  }
}

namespace {

// The paper's 1F1B with weight stashing written out in one process: stage s runs both passes of
// minibatch b on the weight version v_s(b) = max(0, b − NOAM_s + 1) (the updates of the
// minibatches whose backward came before b's forward), and applies b's gradient to its latest
// weights. Without stashing, the backward runs on the latest weights instead. Returns stage
// `wanted`'s final weights.
std::vector<float> one_f_one_b_reference(Backend& backend, const std::vector<StageSlice>& stages,
                                         const pipeline::PipelineShape& shape, int minibatches,
                                         bool stashing, int wanted, float lr,
                                         const SgdOptions& options) {
  const int S = static_cast<int>(stages.size());
  std::vector<std::unique_ptr<StageModel>> models;
  std::vector<std::unique_ptr<Optimizer>> sgds;
  std::vector<std::vector<Tensor>> history(S);  // per stage, every version's weights
  std::vector<Tensor> scratch;
  for (int s = 0; s < S; ++s) {
    models.push_back(
        std::make_unique<StageModel>(backend, stages[s], kInput, 4, 1, s == 0, s == S - 1));
    sgds.push_back(make_sgd(backend, models[s]->parameters(), models[s]->gradients(), options));
    Tensor v0 = Tensor::empty({models[s]->num_parameters()});
    backend.copy(v0, models[s]->parameters());
    history[s].push_back(v0);
    scratch.push_back(Tensor::empty({models[s]->num_parameters()}));
  }
  for (int b = 0; b < minibatches; ++b) {
    const Batch batch = batch_of(b);
    Tensor x = batch.images;
    for (int s = 0; s < S; ++s) {
      const int version = std::max(0, b - pipeline::noam(shape, s) + 1);
      backend.copy(scratch[s], history[s][static_cast<size_t>(version)]);
      models[s]->set_slot_parameters(0, scratch[s]);
      x = models[s]->forward(0, static_cast<uint64_t>(b), x, s == S - 1 ? batch.labels : Tensor());
    }
    Tensor dy;
    for (int s = S - 1; s >= 0; --s) {
      if (!stashing) models[s]->set_slot_parameters(0, models[s]->parameters());
      dy = models[s]->backward(0, dy, 1.0f / kRows);
    }
    for (int s = 0; s < S; ++s) {
      sgds[s]->step(lr);
      Tensor v = Tensor::empty({models[s]->num_parameters()});
      backend.copy(v, models[s]->parameters());
      history[s].push_back(v);
    }
  }
  const Tensor& w = models[wanted]->parameters();
  return {w.data<float>(), w.data<float>() + w.numel()};
}

}  // namespace

TEST_CASE("1f1b with weight stashing (and without) equals the paper's version rule") {
  auto world = make_mpi_comm();
  const int S = world->size(), rank = world->rank();
  auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  const YAML::Node spec = mlp();
  const std::vector<StageSlice> stages = mlp_stages(S);
  const SgdOptions options{0.9f, 0.0f, 1e-4f, false};
  const pipeline::PipelineShape shape{std::vector<int>(static_cast<size_t>(S), 1)};
  constexpr int kMinibatches = 9;
  const pipeline::ScheduleSpec spec_{pipeline::ScheduleKind::one_f_one_b, kMinibatches, 1, 0};
  const auto schedule = pipeline::build_schedule(shape, spec_);
  // The schedule admits as the paper says: b's forward comes after max(0, b − NOAM + 1) steps.
  int steps = 0;
  for (const pipeline::Instruction& in : schedule[rank]) {
    if (in.op == pipeline::Op::step) ++steps;
    if (in.op == pipeline::Op::forward)
      CHECK(steps == std::max(0, in.minibatch - pipeline::noam(shape, rank) + 1));
  }
  for (bool stashing : {true, false}) {
    CAPTURE(stashing);
    const int slots = pipeline::in_flight_bound(shape, spec_, rank);
    StageModel stage(*backend, stages[rank], kInput, 4, slots, rank == 0, rank == S - 1);
    auto sgd_owner = make_sgd(*backend, stage.parameters(), stage.gradients(), options);
    Optimizer& sgd = *sgd_owner;
    PipelineRunner runner(*world, shape, stage, sgd, kRows, stashing);
    runner.run(schedule[rank], spec_, batch_of, 0.1f, 1.0f / kRows);
    const std::vector<float> expected =
        one_f_one_b_reference(*backend, stages, shape, kMinibatches, stashing, rank, 0.1f, options);
    REQUIRE(static_cast<int64_t>(expected.size()) == stage.num_parameters());
    CHECK(std::memcmp(stage.parameters().data<float>(), expected.data(),
                      expected.size() * sizeof(float)) == 0);
    if (stashing) CHECK(runner.versions_max() == pipeline::noam(shape, rank));
  }
}

TEST_CASE("one stage replicated on p ranks steps with the mean gradient of each round") {
  // Data parallelism written as a pipeline: replica b mod p runs minibatch b, the p replicas
  // all-reduce after each round of p minibatches (the last round has fewer) and step with
  // their mean — the reference computes each round's gradients one by one on one rank.
  auto world = make_mpi_comm();
  const int p = world->size(), rank = world->rank();
  auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  const YAML::Node spec = mlp();
  const std::vector<StageSlice> stages = mlp_stages(1);
  const SgdOptions options{0.9f, 0.0f, 1e-4f, false};
  const int minibatches = 3 * p + 1;  // a last round with one minibatch for p replicas
  const pipeline::PipelineShape shape{{p}};
  const pipeline::ScheduleSpec spec_{pipeline::ScheduleKind::one_f_one_b, minibatches, 1, 0};
  StageModel stage(*backend, stages[0], kInput, 4, pipeline::in_flight_bound(shape, spec_, 0), true,
                   true);
  auto sgd_owner = make_sgd(*backend, stage.parameters(), stage.gradients(), options);
  Optimizer& sgd = *sgd_owner;
  PipelineRunner runner(*world, shape, stage, sgd, kRows);
  runner.run(pipeline::build_schedule(shape, spec_)[rank], spec_, batch_of, 0.1f, 1.0f / kRows);

  auto whole = build_model(*backend, spec, kInput, 4);
  auto whole_sgd_owner = make_sgd(*backend, whole->parameters(), whole->gradients(), options);
  Optimizer& whole_sgd = *whole_sgd_owner;
  const int64_t n = whole->num_parameters();
  std::vector<double> sum(static_cast<size_t>(n));
  for (int first = 0; first < minibatches; first += p) {
    std::fill(sum.begin(), sum.end(), 0.0);
    const int count = std::min(p, minibatches - first);
    for (int b = first; b < first + count; ++b) {
      const Batch batch = batch_of(b);
      whole->forward(batch.images, batch.labels);
      whole->backward(1.0f / kRows);
      for (int64_t i = 0; i < n; ++i) sum[i] += whole->gradients().data<float>()[i];
    }
    for (int64_t i = 0; i < n; ++i)
      whole->gradients().data<float>()[i] = static_cast<float>(sum[i] / count);
    whole_sgd.step(0.1f);
  }
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    worst = std::max(worst, static_cast<double>(std::abs(stage.parameters().data<float>()[i] -
                                                         whole->parameters().data<float>()[i])));
  CHECK(worst < 1e-5);  // the sums' order differs: MPI's versus the reference's
  // The replicas hold the same weights, bit for bit.
  std::vector<float> mine(stage.parameters().data<float>(), stage.parameters().data<float>() + n);
  std::vector<float> root = mine;
  world->broadcast(Tensor::borrow(root.data(), Shape{n}), 0);
  CHECK(std::memcmp(root.data(), mine.data(), mine.size() * sizeof(float)) == 0);
}

TEST_CASE("gpipe and 1f1b_flush sum their microbatches into one step: equal, and equal to sync") {
  // Each step: 3 microbatches, their gradients (each loss scaled 1/3 of its mean) summed in
  // order, one step. gpipe and 1f1b_flush differ only in the order of the passes, so they agree
  // bit for bit, and so does the whole model summing the same gradients in the same order.
  auto world = make_mpi_comm();
  const int S = world->size(), rank = world->rank();
  auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  const YAML::Node spec = mlp();
  const std::vector<StageSlice> stages = mlp_stages(S);
  const SgdOptions options{0.9f, 0.0f, 1e-4f, false};
  constexpr int kSteps = 3, kMicro = 3;
  const pipeline::PipelineShape shape{std::vector<int>(static_cast<size_t>(S), 1)};

  auto whole = build_model(*backend, spec, kInput, 4);
  Tensor sum = backend->zeros({whole->num_parameters()});
  auto whole_sgd_owner = make_sgd(*backend, whole->parameters(), sum, options);
  Optimizer& whole_sgd = *whole_sgd_owner;
  for (int step = 0; step < kSteps; ++step) {
    backend->fill_zero(sum);
    for (int i = 0; i < kMicro; ++i) {
      const Batch batch = batch_of(step * kMicro + i);
      whole->forward(batch.images, batch.labels);
      whole->backward(1.0f / kRows / kMicro);
      backend->axpy(1.0f, whole->gradients(), sum);
    }
    whole_sgd.step(0.1f);
  }
  const float* expected = whole->parameters().data<float>() + stages[rank].first_parameter;
  for (const char* kind : {"gpipe", "1f1b_flush"}) {
    CAPTURE(kind);
    const pipeline::ScheduleSpec spec_{pipeline::schedule_kind_named(kind), kSteps, kMicro, 0};
    StageModel stage(*backend, stages[rank], kInput, 4,
                     pipeline::in_flight_bound(shape, spec_, rank), rank == 0, rank == S - 1);
    auto sgd_owner = make_sgd(*backend, stage.parameters(), stage.gradients(), options);
    Optimizer& sgd = *sgd_owner;
    PipelineRunner runner(*world, shape, stage, sgd, kRows);
    runner.run(pipeline::build_schedule(shape, spec_)[rank], spec_, batch_of, 0.1f, 1.0f / kRows);
    CHECK(std::memcmp(stage.parameters().data<float>(), expected,
                      stage.num_parameters() * sizeof(float)) == 0);
  }
}

TEST_CASE("1f1b with vertical sync is SGD with the gradient delayed by S − 1 steps") {
  // Every stage runs minibatch b on version v(b) = max(0, b − S + 1), the input stage's at
  // admission: the whole model's x_{b+1} = x_b − η·g(x_{v(b)}), one process, bit for bit.
  auto world = make_mpi_comm();
  const int S = world->size(), rank = world->rank();
  auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  const YAML::Node spec = mlp();
  const std::vector<StageSlice> stages = mlp_stages(S);
  const SgdOptions options{0.9f, 0.0f, 1e-4f, false};
  constexpr int kMinibatches = 9;
  const pipeline::PipelineShape shape{std::vector<int>(static_cast<size_t>(S), 1)};

  auto whole = build_model(*backend, spec, kInput, 4);
  auto whole_sgd_owner = make_sgd(*backend, whole->parameters(), whole->gradients(), options);
  Optimizer& whole_sgd = *whole_sgd_owner;
  const int64_t n = whole->num_parameters();
  std::vector<std::vector<float>> history;  // the weights after each step
  auto keep = [&] {
    const float* w = whole->parameters().data<float>();
    history.emplace_back(w, w + n);
  };
  keep();
  std::vector<float> latest(static_cast<size_t>(n));
  for (int b = 0; b < kMinibatches; ++b) {
    std::memcpy(latest.data(), whole->parameters().raw(), n * sizeof(float));
    std::memcpy(whole->parameters().raw(), history[std::max(0, b - S + 1)].data(),
                n * sizeof(float));
    const Batch batch = batch_of(b);
    whole->forward(batch.images, batch.labels);
    whole->backward(1.0f / kRows);
    std::memcpy(whole->parameters().raw(), latest.data(), n * sizeof(float));
    whole_sgd.step(0.1f);
    keep();
  }
  const pipeline::ScheduleSpec spec_{pipeline::ScheduleKind::one_f_one_b, kMinibatches, 1, 0};
  StageModel stage(*backend, stages[rank], kInput, 4, pipeline::in_flight_bound(shape, spec_, rank),
                   rank == 0, rank == S - 1);
  auto sgd_owner = make_sgd(*backend, stage.parameters(), stage.gradients(), options);
  Optimizer& sgd = *sgd_owner;
  PipelineRunner runner(*world, shape, stage, sgd, kRows, true, "none", true);
  runner.run(pipeline::build_schedule(shape, spec_)[rank], spec_, batch_of, 0.1f, 1.0f / kRows);
  CHECK(std::memcmp(stage.parameters().data<float>(),
                    whole->parameters().data<float>() + stages[rank].first_parameter,
                    stage.num_parameters() * sizeof(float)) == 0);
  // Vertical sync needs stashed versions.
  CHECK_THROWS_AS(PipelineRunner(*world, shape, stage, sgd, kRows, false, "none", true),
                  InputError);
}

TEST_CASE("replicated stages in a pipeline: uneven counts, a short last round, no hang") {
  // 3-1, 1-3 and 2-1-1 on 4 ranks, 1-1 and 2 on 2: 1F1B-RR routes minibatch b to replica
  // b mod R of every stage; 7 minibatches leave a last round short of replicas. Every run ends,
  // the replicas of a stage hold the same weights, and the loss is finite.
  auto world = make_mpi_comm();
  const int p = world->size(), rank = world->rank();
  auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  std::vector<std::vector<int>> shapes;
  if (p == 2) shapes = {{1, 1}, {2}};
  if (p == 4) shapes = {{3, 1}, {1, 3}, {2, 1, 1}};
  for (const std::vector<int>& replicas : shapes) {
    CAPTURE(replicas.size());
    CAPTURE(replicas.front());
    const pipeline::PipelineShape shape{replicas};
    const int S = shape.stages(), s = shape.stage_of(rank);
    const std::vector<StageSlice> stages = mlp_stages(S);
    for (const char* kind : {"1f1b", "gpipe"}) {
      CAPTURE(kind);
      const pipeline::ScheduleSpec spec_{pipeline::schedule_kind_named(kind), 7,
                                         std::string(kind) == "gpipe" ? 2 : 1, 0};
      StageModel stage(*backend, stages[s], kInput, 4, pipeline::in_flight_bound(shape, spec_, s),
                       s == 0, s == S - 1);
      auto sgd_owner = make_sgd(*backend, stage.parameters(), stage.gradients(),
                                SgdOptions{0.9f, 0.0f, 1e-4f, false});
      Optimizer& sgd = *sgd_owner;
      PipelineRunner runner(*world, shape, stage, sgd, kRows, true, "quantize8");
      const double loss = runner
                              .run(pipeline::build_schedule(shape, spec_)[rank], spec_, batch_of,
                                   0.05f, 1.0f / kRows)
                              .loss_sum;
      CHECK(std::isfinite(loss));
      // Rank 0 of the stage's replicas broadcasts its weights over a stage communicator.
      auto stage_comm = world->split(s, rank);
      const int64_t n = stage.num_parameters();
      std::vector<float> mine(stage.parameters().data<float>(),
                              stage.parameters().data<float>() + n);
      std::vector<float> first = mine;
      stage_comm->broadcast(Tensor::borrow(first.data(), Shape{n}), 0);
      CHECK(std::memcmp(first.data(), mine.data(), mine.size() * sizeof(float)) == 0);
    }
  }
}
