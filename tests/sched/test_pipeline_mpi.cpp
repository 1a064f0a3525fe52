// The pipeline interpreter on 2 and 4 ranks, one stage per rank: with one minibatch in the
// pipeline at a time (gpipe or 1f1b_flush with one microbatch, 1f1b with in_flight 1) every
// stage ends with exactly the weights of the same layers trained whole on one rank.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "comm/mpi_comm.h"
#include "core/rng.h"
#include "nn/model.h"
#include "sched/pipeline_runner.h"

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

}  // namespace

TEST_CASE("a pipeline with one minibatch in flight trains exactly as the whole model") {
  auto world = make_mpi_comm();
  const int S = world->size(), rank = world->rank();
  auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  const YAML::Node spec = YAML::Load("{name: mlp, hidden: [16, 16]}");
  const std::vector<std::string> points = model_cut_points(spec, kInput);  // fc1, fc2, fc3
  REQUIRE(static_cast<int>(points.size()) >= S - 1);
  const std::vector<std::string> starts(points.end() - (S - 1), points.end());
  const std::vector<ModelStage> stages = split_model(spec, kInput, starts);
  const SgdOptions sgd_options{0.9f, 0.0f, 1e-4f, false};
  constexpr int kSteps = 5;
  constexpr float kLr = 0.1f;

  // The reference: the whole model on this rank, minibatch after minibatch.
  auto whole = build_model(*backend, spec, kInput, 4);
  Sgd whole_sgd(*backend, whole->parameters(), whole->gradients(), sgd_options);
  for (int b = 0; b < kSteps; ++b) {
    const Batch batch = batch_of(b);
    whole->forward(batch.images, batch.labels);
    whole->backward(1.0f / kRows);
    whole_sgd.step(kLr);
  }
  const float* expected = whole->parameters().data<float>() + stages[rank].first_parameter;

  pipeline::PipelineShape shape{std::vector<int>(static_cast<size_t>(S), 1)};
  for (const pipeline::ScheduleSpec spec_ : {pipeline::ScheduleSpec{"gpipe", kSteps, 1, 0},
                                             pipeline::ScheduleSpec{"1f1b_flush", kSteps, 1, 0},
                                             pipeline::ScheduleSpec{"1f1b", kSteps, 1, 1}}) {
    CAPTURE(spec_.kind);
    const int slots = pipeline::in_flight_bound(shape, spec_, shape.stage_of(rank));
    StageModel stage(*backend, stages[rank], kInput, 4, slots, rank == 0, rank == S - 1);
    Sgd sgd(*backend, stage.parameters(), stage.gradients(), sgd_options);
    PipelineRunner runner(*world, shape, stage, sgd, kRows);
    const auto schedule = pipeline::build_schedule(shape, spec_);
    runner.run(schedule[rank], batch_of, kLr, 1.0f / kRows);
    CHECK(stage.num_parameters() == stages[rank].parameters);
    CHECK(std::memcmp(stage.parameters().data<float>(), expected,
                      stage.num_parameters() * sizeof(float)) == 0);
  }
}
