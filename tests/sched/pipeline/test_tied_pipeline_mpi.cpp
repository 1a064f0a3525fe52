// A GPT whose output head is tied to its token embedding, pipelined as Megatron-LM pipelines it:
// the embedding on the first stage, the head on the last, each with a copy of the matrix whose
// gradients the two stages sum every step. Where PipeDream is sync (GPipe, a flush per step) the
// pipelined GPT's weights equal the single-rank model's (to float rounding: the two uses'
// gradients are summed in another order), the two copies are equal bit for bit, and the weights
// by name are the single-rank model's names (the matrix once, under the embedding's name).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>  // find
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "comm/comm.h"      // make_local_comm: the single-rank run
#include "comm/mpi_comm.h"  // make_mpi_comm
#include "run/config.h"
#include "run/run_builder.h"
#include "sched/pipeline/pipedream_scheduler.h"  // PipedreamOptions: the planner's decision

using namespace dtrain;

namespace {

constexpr int kVocab = 17, kEmbd = 16, kEpochs = 2;

// Random token windows (the stand-in: no files), 4 blocks.
ExperimentConfig gpt(const std::string& algorithm, const std::string& optimizer) {
  return parse_config(fmt::format(R"(seed: 3
model: {{name: gpt, n_layer: 4, n_head: 2, n_embd: {}}}
dataset: {{name: tokens, path: /nonexistent/tied, vocab_size: {}, block_size: 8, batch_size: 8,
          train_size: 48, test_size: 16}}
cluster: {{device: cpu, threads_per_rank: 1}}
algorithm: {}
optimizer: {}
)",
                                  kEmbd, kVocab, algorithm, optimizer),
                      "tied_pipeline_test.yaml");
}

struct Trained {
  NamedTensors weights;      // the whole model's by name (rank 0)
  std::vector<float> stage;  // this rank's flat parameters
};

Trained train(const ExperimentConfig& c, Comm& comm) {
  auto run = build_run(c, {comm.rank(), comm.size(), 0, false}, DataFiles::stand_in_when_missing);
  auto sched = build_scheduler(*run, comm, {});
  for (int e = 0; e < kEpochs; ++e) {
    run->train_loader->start_epoch(e);
    sched->run_epoch(*run->train_loader, e, 0);
  }
  sched->evaluate(*run->test_loader);
  Trained t;
  t.weights = sched->weights();
  SchedulerState state;
  sched->save(state);
  for (const auto& [n, values] : state.buffers())
    if (n == "pipedream.stage.parameters" || n == "model.parameters") t.stage = values;
  REQUIRE(!t.stage.empty());
  return t;
}

// The pipeline's copies of the tied matrix: the first stage's table (its first tensor) and the
// last stage's head (its last tensor) are the same bits, on every replica.
void check_copies_equal(Comm& comm, const std::vector<int>& replicas,
                        const std::vector<float>& stage) {
  const int64_t n = int64_t{kVocab} * kEmbd;
  const int last_first_rank = comm.size() - replicas.back();
  // Rank 0 collects every first-stage rank's table and every last-stage rank's copy.
  std::vector<double> tables(static_cast<size_t>(comm.size() * n), 0.0);
  const bool first = comm.rank() < replicas.front(), last = comm.rank() >= last_first_rank;
  if (first || last) {  // the stages between hold no copy
    const auto begin = first ? stage.begin() : stage.end() - n;
    for (int64_t i = 0; i < n; ++i)
      tables[static_cast<size_t>(comm.rank() * n + i)] = static_cast<double>(begin[i]);
  }
  comm.allreduce_sum(tables);
  int differing = 0;
  for (int r = 1; r < comm.size(); ++r)
    if (r < replicas.front() || r >= last_first_rank)
      for (int64_t i = 0; i < n; ++i)
        differing += tables[static_cast<size_t>(r * n + i)] != tables[static_cast<size_t>(i)];
  CHECK(differing == 0);
}

// Trains the tied GPT as a gpipe pipeline over every rank and as one rank's sync; compares.
void check_tied_against_single(Comm& comm, const std::string& stages, const std::string& shape,
                               int microbatches, const std::string& optimizer) {
  CAPTURE(stages);
  CAPTURE(shape);
  const std::string algorithm = fmt::format(
      "{{name: pipedream, schedule: gpipe, microbatches: {}, stages: {}, replicas: {}}}",
      microbatches, stages, shape);
  const Trained pipe = train(gpt(algorithm, optimizer), comm);
  std::vector<int> replicas;
  for (char ch : shape)
    if (ch >= '1' && ch <= '9') replicas.push_back(ch - '0');
  check_copies_equal(comm, replicas, pipe.stage);
  if (comm.rank() != 0) return;
  const auto local = make_local_comm();
  const Trained whole = train(gpt("{name: sync}", optimizer), *local);
  REQUIRE(pipe.weights.size() == whole.weights.size());
  for (size_t k = 0; k < whole.weights.size(); ++k) {
    const NamedTensor& a = pipe.weights[k];
    const NamedTensor& b = whole.weights[k];
    CAPTURE(b.name);
    CHECK(a.name == b.name);
    REQUIRE(a.shape == b.shape);
    float worst = 0;
    for (size_t i = 0; i < a.values.size(); ++i)
      worst = std::max(worst, std::abs(a.values[i] - b.values[i]));
    CHECK(worst < 1e-5f);
  }
  // The tied matrix once, under the embedding's name: no lm_head of its own.
  for (const NamedTensor& t : pipe.weights) CHECK(t.name.find("lm_head") == std::string::npos);
}

}  // namespace

TEST_CASE("a tied GPT pipelined over every rank equals the single-rank GPT (gpipe)") {
  auto comm = make_mpi_comm();
  const int world = comm->size();
  struct Layout {
    std::string stages, replicas;
    int microbatches;
  };
  std::vector<Layout> layouts;
  if (world == 2) layouts.push_back({"[transformer.h.2.ln_1]", "[1, 1]", 1});
  if (world == 4) {
    layouts.push_back(
        {"[transformer.h.1.ln_1, transformer.h.2.ln_1, transformer.h.3.ln_1]", "[1, 1, 1, 1]", 1});
    // Replicated first and last stages: each pair of replicas sums with its own peer.
    layouts.push_back({"[transformer.h.2.ln_1]", "[2, 2]", 2});
  }
  // SGD with momentum; AdamW with a clip that binds (the norm over the stages counts the tied
  // matrix once, as sync's norm of the whole gradient does).
  for (const std::string optimizer :
       {"{name: sgd, lr: 0.1, momentum: 0.9, weight_decay: 0.0001}",
        "{name: adamw, lr: 0.01, weight_decay: 0.1, clip_grad_norm: 0.05}"})
    for (const Layout& l : layouts) {
      CAPTURE(optimizer);
      check_tied_against_single(*comm, l.stages, l.replicas, l.microbatches, optimizer);
    }
}

TEST_CASE("1f1b refuses a tie between stages of different replica counts") {
  auto comm = make_mpi_comm();
  if (comm->size() != 4) return;
  const ExperimentConfig c =
      gpt("{name: pipedream, stages: [transformer.h.2.ln_1], replicas: [3, 1]}",
          "{name: sgd, lr: 0.1}");
  std::string message;
  try {
    build_scheduler(*build_run(c, {comm->rank(), 4, 0, false}, DataFiles::stand_in_when_missing),
                    *comm, {});
  } catch (const InputError& e) {
    message = e.what();
  }
  CHECK(message.find("algorithm.replicas") != std::string::npos);
  CHECK(message.find("lm_head") != std::string::npos);
}

TEST_CASE("stages: auto cuts a tied GPT between transformer blocks") {
  auto comm = make_mpi_comm();
  const int world = comm->size();
  auto broadcast = [&](const std::string& text) {
    std::string bytes = text;
    comm->broadcast(bytes, 0);
    return bytes;
  };
  const std::vector<std::string> blocks{"transformer.h.1.ln_1", "transformer.h.2.ln_1",
                                        "transformer.h.3.ln_1"};
  std::string one_each = "[1";
  for (int r = 1; r < world; ++r) one_each += ", 1";
  one_each += "]";
  for (const std::string& replicas : {one_each, std::string("auto")}) {
    CAPTURE(replicas);
    const ExperimentConfig c =
        gpt("{name: pipedream, stages: auto, replicas: " + replicas + "}", "{name: sgd, lr: 0.1}");
    auto run =
        build_run(c, {comm->rank(), world, 0, false, broadcast}, DataFiles::stand_in_when_missing);
    const auto& o = run->config.algorithm.get<PipedreamOptions>();
    for (const std::string& start : o.stages.value)
      CHECK(std::find(blocks.begin(), blocks.end(), start) != blocks.end());
    // One rank per stage: as many stages as ranks, each of whole blocks.
    if (replicas != "auto") CHECK(o.stages.value.size() == static_cast<size_t>(world - 1));
    if (replicas != "auto" && world == 4) CHECK(o.stages.value == blocks);
    // What the planner chose trains: the first and last stages step together.
    CHECK(o.replicas.value.front() == o.replicas.value.back());
    auto sched = build_scheduler(*run, *comm, {});
    CHECK(sched != nullptr);
  }
}

TEST_CASE("a tied pipeline's saved state resumes in a fresh scheduler as if never stopped") {
  auto comm = make_mpi_comm();
  const int world = comm->size();
  std::string stages = "[transformer.h.2.ln_1]", replicas = world == 4 ? "[2, 2]" : "[1, 1]";
  const ExperimentConfig c =
      gpt(fmt::format("{{name: pipedream, stages: {}, replicas: {}}}", stages, replicas),
          "{name: sgd, lr: 0.1, momentum: 0.9}");
  auto stage_weights = [](Scheduler& s) {
    SchedulerState state;
    s.save(state);
    for (const auto& [n, values] : state.buffers())
      if (n == "pipedream.stage.parameters") return values;
    return std::vector<float>{};
  };
  // Straight through two epochs (1f1b).
  auto run = build_run(c, {comm->rank(), world, 0, false}, DataFiles::stand_in_when_missing);
  auto straight = build_scheduler(*run, *comm, {});
  SchedulerState after_one;
  for (int e = 0; e < 2; ++e) {
    run->train_loader->start_epoch(e);
    straight->run_epoch(*run->train_loader, e, 0);
    if (e == 0) straight->save(after_one);
  }
  const std::vector<float> expected = stage_weights(*straight);
  // A fresh scheduler (its copies initialised, then shared) takes the state after epoch 1.
  auto again = build_run(c, {comm->rank(), world, 0, false}, DataFiles::stand_in_when_missing);
  auto resumed = build_scheduler(*again, *comm, {});
  resumed->load(after_one);
  again->train_loader->start_epoch(1);
  resumed->run_epoch(*again->train_loader, 1, 0);
  const std::vector<float> got = stage_weights(*resumed);
  REQUIRE(got.size() == expected.size());
  CHECK(std::memcmp(got.data(), expected.data(), got.size() * 4) == 0);
}
