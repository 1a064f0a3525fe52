// Scheduler state round trip in memory (docs/architecture.md, decision 9): save, continue, load,
// continue again → the same parameters, bit for bit, for every built algorithm — with a
// pipelined gradient in flight, between two model averagings, with HPSGD's round in flight and
// gradients accumulated on its replica, and dropout masks that depend on the step.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_comm.h"
#include "trainee.h"

using namespace dtrain;
using test::Trainee;
using test::TraineeOptions;

namespace {

std::vector<float> weights(const Trainee& t) {
  return {t.weights(), t.weights() + t.size()};
}

// Starts `epoch` and skips its first `batches` batches.
void seek(Trainee& t, int epoch, int batches) {
  t.start_epoch(epoch);
  Batch skipped;
  for (int i = 0; i < batches; ++i) REQUIRE(t.loader->next(skipped));
}

}  // namespace

TEST_CASE("save, continue, load, continue again: identical parameters") {
  auto world = make_mpi_comm();
  const char* with_dropout =
      "{layers: [{name: flat, type: flatten}, {name: fc1, type: linear, out_features: 16}, "
      "{name: relu, type: relu}, {name: drop, type: dropout, p: 0.2}, "
      "{name: fc2, type: linear, out_features: 3}]}";
  struct Case {
    const char* algorithm;
    const char* keys;
  };
  for (const Case& c : {Case{"sync", "segments: 2"}, Case{"ps_sync", ""}, Case{"pipe_sgd", "K: 2"},
                        Case{"pipe_sgd", "K: 3, segments: 2"}, Case{"local_sgd", "sync_period: 3"},
                        Case{"hpsgd", "sync_period: 2"}, Case{"hpsgd", "sync_period: 3"},
                        Case{"sapipe", "stale_layers: 1, compensation: wp3"},
                        Case{"sapipe", "stale_layers: all, compensation: dc"},
                        Case{"sapipe", "stale_layers: 1, compensation: wp2, warmup_epochs: 1"}}) {
    CAPTURE(c.algorithm);
    CAPTURE(c.keys);
    TraineeOptions o;
    o.algorithm = c.algorithm;
    o.keys = c.keys;
    o.model = with_dropout;
    const bool plain = std::string(c.algorithm) == "hpsgd";  // plain SGD only
    if (plain) o.momentum = 0;
    Trainee t(*world, o);
    t.start_epoch(0);
    t.train(0, 5);
    SchedulerState state;
    t.sched->save(state);
    t.train(0, 6);
    t.sched->flush();
    const std::vector<float> first = weights(t);

    t.sched->load(state);
    seek(t, 0, 5);
    t.train(0, 6);
    t.sched->flush();
    CHECK(std::memcmp(first.data(), t.weights(), first.size() * 4) == 0);
    CHECK(state.has("model.parameters"));
    CHECK(state.has("optimizer.momentum") == !plain);
    CHECK(state.has("model.step"));
  }
}

TEST_CASE("a loaded state continues in a fresh scheduler exactly as the saved one would") {
  auto world = make_mpi_comm();
  TraineeOptions o;
  o.algorithm = "pipe_sgd";
  o.keys = "K: 2";
  Trainee saved(*world, o), fresh(*world, o);
  saved.start_epoch(0);
  saved.train(0, 7);
  SchedulerState state;
  saved.sched->save(state);
  fresh.sched->load(state);
  seek(fresh, 0, 7);
  saved.train(0, 5);
  fresh.train(0, 5);
  saved.sched->flush();
  fresh.sched->flush();
  CHECK(std::memcmp(saved.weights(), fresh.weights(), saved.size() * 4) == 0);
}
