// The pipedream scheduler as training assembles it (run builder, loaders, LR schedule), against
// sync: GPipe over the job's ranks with one microbatch is single-rank sync bit for bit (stages'
// weights laid end to end, and the test accuracy); one stage replicated on every rank is sync on
// those ranks with the replicas' minibatches as its global batch; 1f1b trains. With AdamW (each
// stage's own, decay by its own tensors) the same equalities hold, and a clip by the norm over
// all stages equals single-rank sync's clip to rounding.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>  // max
#include <cmath>
#include <cstring>
#include <vector>

#include <csignal>  // SIGTERM

#include "comm/mpi_comm.h"      // make_mpi_comm
#include "comm/stop_vote.h"     // StopVote
#include "core/error.h"         // InputError
#include "core/stop_request.h"  // request_stop
#include "run/config.h"
#include "run/run_builder.h"

using namespace dtrain;

namespace {

constexpr int kEpochs = 2;

const char* kMomentum = "{lr: 0.05, momentum: 0.9, weight_decay: 0.0001, schedule: {name: cosine}}";
// AdamW: matrices decay, biases do not (each stage's optimizer sees its own tensors).
const char* kAdamW = "{name: adamw, lr: 0.01, weight_decay: 0.1, schedule: {name: cosine}}";

// `train`: the train section (the schedule's total_iterations comes from max_iterations).
ExperimentConfig experiment(const std::string& algorithm, int batch, const char* model,
                            const std::string& optimizer = kMomentum,
                            const std::string& train = "{epochs: 1}") {
  return parse_config(fmt::format(R"(seed: 5
model: {}
dataset: {{name: synthetic, shape: [1, 8, 8], classes: 4, train_size: 512, test_size: 100,
          batch_size: {}, test_batch_size: 48}}
cluster: {{device: cpu, threads_per_rank: 1}}
algorithm: {}
optimizer: {}
train: {}
)",
                                  model, batch, algorithm, optimizer, train),
                      "pipedream_test.yaml");
}

const char* kMlp = "{name: mlp, hidden: [32, 16]}";

struct Trained {
  std::vector<float> weights;  // the model's, or this rank's stage's
  EvalResult eval;
  EpochStats last;
};

Trained train(const ExperimentConfig& c, Comm& comm) {
  auto run = build_run(c, {comm.rank(), comm.size(), 0, false});
  auto sched = build_scheduler(*run, comm, {});
  Trained t;
  for (int e = 0; e < kEpochs; ++e) {
    run->train_loader->start_epoch(e);
    t.last = sched->run_epoch(*run->train_loader, e, 0);
  }
  t.eval = sched->evaluate(*run->test_loader);
  SchedulerState state;
  sched->save(state);
  const std::string name =
      c.algorithm.name == "pipedream" ? "pipedream.stage.parameters" : "model.parameters";
  for (const auto& [n, values] : state.buffers())
    if (n == name) t.weights = values;
  REQUIRE(!t.weights.empty());
  return t;
}

// Every rank's stage weights, in rank order, laid end to end (each exact in a double).
std::vector<float> end_to_end(Comm& comm, const std::vector<float>& mine) {
  std::vector<double> sizes(static_cast<size_t>(comm.size()), 0.0);
  sizes[static_cast<size_t>(comm.rank())] = static_cast<double>(mine.size());
  comm.allreduce_sum(sizes);
  size_t offset = 0, total = 0;
  for (int r = 0; r < comm.size(); ++r) {
    if (r < comm.rank()) offset += static_cast<size_t>(sizes[static_cast<size_t>(r)]);
    total += static_cast<size_t>(sizes[static_cast<size_t>(r)]);
  }
  std::vector<double> all(total, 0.0);
  for (size_t i = 0; i < mine.size(); ++i) all[offset + i] = mine[i];
  comm.allreduce_sum(all);
  return {all.begin(), all.end()};
}

}  // namespace

TEST_CASE("gpipe with one microbatch over every rank equals single-rank sync, bit for bit") {
  auto world = make_mpi_comm();
  const int S = world->size();
  // The MLP cut before each of its last S − 1 linear layers (fc2, fc3 for three ranks).
  const std::string stages = S == 2 ? "[fc3]" : "[fc2, fc3]";
  for (const char* kind : {"gpipe", "1f1b_flush"}) {
    CAPTURE(kind);
    const Trained pipe =
        train(experiment(fmt::format("{{name: pipedream, schedule: {}, stages: {}}}", kind, stages),
                         32, kMlp),
              *world);
    auto local = make_local_comm();
    const Trained sync = train(experiment("{name: sync}", 32, kMlp), *local);
    const std::vector<float> all = end_to_end(*world, pipe.weights);
    REQUIRE(all.size() == sync.weights.size());
    CHECK(std::memcmp(all.data(), sync.weights.data(), all.size() * sizeof(float)) == 0);
    // Evaluated through the stages: the same loss and accuracy on every rank.
    CHECK(pipe.eval.acc == sync.eval.acc);
    CHECK(pipe.eval.loss == doctest::Approx(sync.eval.loss).epsilon(1e-6));
    CHECK(pipe.last.iterations == 16);  // 512 / 32 optimizer steps
  }
}

TEST_CASE(
    "pipedream with AdamW where it is sync (gpipe with one microbatch, 1f1b with one minibatch in "
    "flight) equals single-rank sync with AdamW, clipped too") {
  auto world = make_mpi_comm();
  const int S = world->size();
  const std::string stages = S == 2 ? "[fc3]" : "[fc2, fc3]";
  for (const std::string schedule : {"gpipe", "1f1b, in_flight: 1"}) {
    for (const std::string clip : {"", ", clip_grad_norm: 0.05"}) {
      CAPTURE(schedule);
      CAPTURE(clip);
      const std::string optimizer = std::string(kAdamW).insert(std::strlen(kAdamW) - 1, clip);
      const Trained pipe = train(
          experiment(fmt::format("{{name: pipedream, schedule: {}, stages: {}}}", schedule, stages),
                     32, kMlp, optimizer),
          *world);
      auto local = make_local_comm();
      const Trained sync = train(experiment("{name: sync}", 32, kMlp, optimizer), *local);
      const std::vector<float> all = end_to_end(*world, pipe.weights);
      REQUIRE(all.size() == sync.weights.size());
      if (clip.empty()) {
        CHECK(std::memcmp(all.data(), sync.weights.data(), all.size() * sizeof(float)) == 0);
      } else {
        // The norm over the stages is their squared norms summed: the whole model's to rounding.
        double worst = 0;
        for (size_t i = 0; i < all.size(); ++i)
          worst = std::max<double>(worst, std::abs(all[i] - sync.weights[i]));
        CHECK(worst < 1e-5);
        // The clip bit: the unclipped run ends elsewhere.
        const Trained free = train(experiment("{name: sync}", 32, kMlp, kAdamW), *local);
        double moved = 0;
        for (size_t i = 0; i < all.size(); ++i)
          moved = std::max<double>(moved, std::abs(free.weights[i] - sync.weights[i]));
        CHECK(moved > 1e-3);
      }
    }
  }
}

TEST_CASE(
    "pipedream takes the schedule's parts counted in iterations (warm-up, a cosine over "
    "train.max_iterations) at the run's iteration, as sync does") {
  auto world = make_mpi_comm();
  const int S = world->size();
  const std::string stages = S == 2 ? "[fc3]" : "[fc2, fc3]";
  // nanoGPT's schedule: 6 warm-up iterations, a cosine down to min_lr at iteration 24 of the
  // 32 the two epochs run (the last 8 at min_lr).
  const std::string optimizer =
      "{name: adamw, lr: 0.01, weight_decay: 0.1, schedule: {name: cosine, min_lr: 0.001, "
      "warmup_iterations: 6}}";
  const std::string train_keys = "{epochs: 2, max_iterations: 24}";
  for (const std::string schedule : {"gpipe", "1f1b, in_flight: 1"}) {
    CAPTURE(schedule);
    const Trained pipe = train(
        experiment(fmt::format("{{name: pipedream, schedule: {}, stages: {}}}", schedule, stages),
                   32, kMlp, optimizer, train_keys),
        *world);
    auto local = make_local_comm();
    const Trained sync = train(experiment("{name: sync}", 32, kMlp, optimizer, train_keys), *local);
    const std::vector<float> all = end_to_end(*world, pipe.weights);
    REQUIRE(all.size() == sync.weights.size());
    CHECK(std::memcmp(all.data(), sync.weights.data(), all.size() * sizeof(float)) == 0);
    // The schedule bit: with the rate of its epoch alone (no warm-up) sync ends elsewhere.
    const Trained epochwise =
        train(experiment("{name: sync}", 32, kMlp,
                         "{name: adamw, lr: 0.01, weight_decay: 0.1, schedule: {name: cosine, "
                         "min_lr: 0.001}}",
                         train_keys),
              *local);
    CHECK(std::memcmp(epochwise.weights.data(), sync.weights.data(), all.size() * sizeof(float)) !=
          0);
  }
}

TEST_CASE("pipedream saves the stage's AdamW state; clipping 1f1b needs equal replicas") {
  auto world = make_mpi_comm();
  const int S = world->size();
  const std::string stages = S == 2 ? "[fc3]" : "[fc2, fc3]";
  const ExperimentConfig c =
      experiment(fmt::format("{{name: pipedream, stages: {}}}", stages), 16, kMlp, kAdamW);
  auto run = build_run(c, {world->rank(), world->size(), 0, false});
  auto sched = build_scheduler(*run, *world, {});
  run->train_loader->start_epoch(0);
  sched->run_epoch(*run->train_loader, 0, 4);
  SchedulerState state;
  sched->save(state);
  CHECK(state.has("pipedream.stage.m"));
  CHECK(state.has("pipedream.stage.v"));
  CHECK(state.counter("pipedream.stage.step") == 4);  // 1f1b: a step per minibatch
  if (S == 3) {
    // Stage 0 on two ranks steps once per two minibatches, stage 1 once per minibatch.
    const ExperimentConfig uneven =
        experiment("{name: pipedream, stages: [fc3], replicas: [2, 1]}", 16, kMlp,
                   std::string(kAdamW).insert(std::strlen(kAdamW) - 1, ", clip_grad_norm: 1"));
    auto r = build_run(uneven, {world->rank(), world->size(), 0, false});
    CHECK_THROWS_WITH_AS(build_scheduler(*r, *world, {}),
                         doctest::Contains("optimizer.clip_grad_norm: pipedream clips"),
                         InputError);
  }
}

TEST_CASE("one stage replicated on every rank equals sync on those ranks") {
  auto world = make_mpi_comm();
  const int p = world->size();
  // Each replica takes a whole minibatch of 16 rows: sync's global batch is p of them.
  const Trained pipe =
      train(experiment(fmt::format("{{name: pipedream, stages: [], replicas: [{}]}}", p), 16, kMlp),
            *world);
  const Trained sync = train(experiment("{name: sync}", 16 * p, kMlp), *world);
  REQUIRE(pipe.weights.size() == sync.weights.size());
  // The same sums in another order (the mean over replicas after the all-reduce, not before).
  double worst = 0;
  for (size_t i = 0; i < pipe.weights.size(); ++i)
    worst = std::max<double>(worst, std::abs(pipe.weights[i] - sync.weights[i]));
  CHECK(worst < 1e-5);
  CHECK(pipe.eval.acc == doctest::Approx(sync.eval.acc).epsilon(0.02));
}

TEST_CASE("1f1b with stashing trains through every stage; the epoch is whole rounds") {
  auto world = make_mpi_comm();
  const int S = world->size();
  const std::string stages = S == 2 ? "[fc3]" : "[fc2, fc3]";
  const Trained pipe =
      train(experiment(fmt::format("{{name: pipedream, stages: {}}}", stages), 16, kMlp), *world);
  CHECK(pipe.last.iterations == 32);  // 512 / 16 minibatches through the pipeline
  // The output stage accounts for every row; the others for none.
  CHECK(pipe.last.samples == (world->rank() == S - 1 ? 512 : 0));
  CHECK(std::isfinite(pipe.eval.loss));
  CHECK(pipe.eval.acc > 0.25);  // better than chance on 4 classes after two epochs
}

TEST_CASE("one stage on one rank equals sync, bit for bit") {
  auto local = make_local_comm();
  const char* net = R"({layers: [
    {name: c1, type: conv2d, out_channels: 4, kernel: 3, padding: 1},
    {name: bn, type: batchnorm2d}, {name: r1, type: relu},
    {name: d, type: dropout, p: 0.2},
    {name: f, type: flatten}, {name: fc, type: linear, out_features: 4}]})";
  const Trained pipe = train(experiment("{name: pipedream, stages: []}", 32, net), *local);
  const Trained sync = train(experiment("{name: sync}", 32, net), *local);
  REQUIRE(pipe.weights.size() == sync.weights.size());
  CHECK(std::memcmp(pipe.weights.data(), sync.weights.data(), pipe.weights.size() * 4) == 0);
  CHECK(pipe.eval.acc == sync.eval.acc);
}

// A signal ends a 1f1b run early: the input stage stops admitting, the end travels in
// the headers, every rank finishes the schedule of the minibatches admitted — the same weights,
// bit for bit, as a run asked for that many minibatches from the start.
TEST_CASE("a signal ends the run early, as a run of that many minibatches (1f1b, gpipe)") {
  auto comm = make_mpi_comm();
  if (comm->size() < 2) return;
  const std::string replicas = comm->size() == 3 ? ", replicas: [2, 1]" : "";
  for (const std::string schedule : {"1f1b", "gpipe, microbatches: 2"}) {
    CAPTURE(schedule);
    const ExperimentConfig c = experiment(
        "{name: pipedream, stages: [fc2], schedule: " + schedule + replicas + "}", 16, kMlp);
    int64_t epoch_iterations = 0;
    // `signalled`: the rank that gets the signal, or -1.
    auto part_of = [&](int signalled, int64_t count, int* ran) {
      auto run = build_run(c, {comm->rank(), comm->size(), 0, false});
      StopVote vote(*comm);
      auto sched = build_scheduler(*run, *comm, {}, &vote);
      epoch_iterations = sched->epoch_iterations(0);
      sched->seek(*run->train_loader, 0, 0);
      if (comm->rank() == signalled) request_stop(SIGTERM);
      const EpochStats s = sched->run_epoch(*run->train_loader, EpochPart{0, 0, count});
      *ran = static_cast<int>(s.iterations);
      CHECK(vote.settle() == (signalled >= 0));
      clear_stop_request();
      SchedulerState state;
      sched->save(state);
      return state.buffers().front().second;
    };
    // On the input stage's first rank, and on the output stage's (passed on to rank 0).
    for (const int signalled : {0, comm->size() - 1}) {
      CAPTURE(signalled);
      int early = 0, asked = 0;
      const std::vector<float> stopped = part_of(signalled, 0, &early);
      CHECK(early > 0);
      CHECK(early < epoch_iterations);
      const std::vector<float> whole = part_of(-1, early, &asked);
      CHECK(asked == early);
      REQUIRE(stopped.size() == whole.size());
      CHECK(std::memcmp(stopped.data(), whole.data(), whole.size() * 4) == 0);
    }
  }
}
