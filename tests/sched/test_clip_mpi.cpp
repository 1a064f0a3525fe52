// optimizer.clip_grad_norm on p ranks, against hand-clipped steps: ps_sync and pipe_sgd clip the
// all-reduced gradient (the global batch's, the same on every rank; pipe_sgd the stale one it
// applies), local_sgd and d_psgd each rank's own gradient by its own norm. Gradient accumulation
// (N = 2) on p ranks: sync equals N = 1, with as many all-reduces per step.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "comm/mpi_comm.h"
#include "delaying_comm.h"  // DelayingComm: with no delay it only counts
#include "trainee.h"

using namespace dtrain;

using test::Trainee;
using test::TraineeOptions;

namespace {

constexpr double kMaxNorm = 1e-3;

TraineeOptions plain(const char* algorithm, const std::string& keys) {
  TraineeOptions o;
  o.algorithm = algorithm;
  o.keys = keys;
  o.momentum = 0;
  o.weight_decay = 0;
  return o;
}

// How far `w1` is from w0 − lr · g · max_norm / (‖g‖ + 1e-6), relative to that step's length.
double off_the_clipped_step(const std::vector<float>& w0, const std::vector<float>& w1,
                            const float* g) {
  double squares = 0;
  for (size_t e = 0; e < w0.size(); ++e) squares += double(g[e]) * g[e];
  const double norm = std::sqrt(squares);
  CHECK(norm > 10 * kMaxNorm);  // the clip bites
  const double coefficient = kMaxNorm / (norm + 1e-6);
  double error = 0;
  for (size_t e = 0; e < w0.size(); ++e) {
    const double expected = -double(test::kLr) * coefficient * g[e];
    const double moved = double(w1[e]) - w0[e];
    error += (moved - expected) * (moved - expected);
  }
  return std::sqrt(error) / (test::kLr * kMaxNorm);
}

}  // namespace

TEST_CASE("ps_sync and pipe_sgd clip the all-reduced gradient: the global batch's norm") {
  auto world = make_mpi_comm();
  auto local = make_local_comm();
  // pipe_sgd with K = 2: iteration 3 applies the gradient of iteration 1, taken at w0.
  for (auto [algorithm, keys, iterations] :
       {std::tuple{"ps_sync", "", 1}, std::tuple{"pipe_sgd", "K: 2", 3}}) {
    const std::string name = algorithm;
    CAPTURE(name);
    TraineeOptions o = plain(algorithm, keys);
    Trainee single(*local, o);  // unclipped, the whole global batch: its gradient by hand
    o.optimizer_keys = "clip_grad_norm: 0.001";
    Trainee parallel(*world, o);
    const std::vector<float> w0 = parallel.host_weights();
    parallel.start_epoch(0);
    parallel.train(0, iterations);
    single.start_epoch(0);
    const float* g = test::gradient_at(single, w0, /*mean=*/true);
    CHECK(off_the_clipped_step(w0, parallel.host_weights(), g) < 1e-3);
  }
}

TEST_CASE("local_sgd and d_psgd clip each rank's own gradient by its own norm") {
  auto world = make_mpi_comm();
  for (auto [algorithm, keys] :
       {std::pair{"local_sgd", "sync_period: 100"}, std::pair{"d_psgd", ""}}) {
    const std::string name = algorithm;
    CAPTURE(name);
    TraineeOptions o = plain(algorithm, keys);
    Trainee reference(*world, o);  // unclipped: this rank's gradient by hand
    o.optimizer_keys = "clip_grad_norm: 0.001";
    Trainee clipped(*world, o);
    const std::vector<float> w0 = clipped.host_weights();  // the same on every rank
    clipped.start_epoch(0);
    clipped.train(0, 1);
    reference.start_epoch(0);
    const float* g = test::gradient_at(reference, w0, /*mean=*/true);  // this rank's shard
    CHECK(off_the_clipped_step(w0, clipped.host_weights(), g) < 1e-3);
  }
}

TEST_CASE("sync with 2 micro-batches a step on p ranks: N = 1's weights, as many all-reduces") {
  auto world = make_mpi_comm();
  std::vector<std::vector<float>> weights;
  std::vector<int64_t> allreduces;
  for (int steps : {1, 2}) {
    CAPTURE(steps);
    test::DelayingComm counting(*world, 0);
    TraineeOptions o;
    o.global_batch = 48;  // 12 to 24 rows a rank: micro-batches of 6 to 12
    o.keys = "segments: 3";
    o.accumulation_steps = steps;
    Trainee t(counting, o);
    t.start_epoch(0);
    t.train(0, 5);
    weights.push_back(t.host_weights());
    allreduces.push_back(counting.traffic().allreduces.load());
  }
  CHECK(allreduces[0] == 5 * 3);  // one per segment per step
  CHECK(allreduces[1] == allreduces[0]);
  double worst = 0, largest = 0;
  for (size_t e = 0; e < weights[0].size(); ++e) {
    worst = std::max(worst, double(std::abs(weights[1][e] - weights[0][e])));
    largest = std::max(largest, double(std::abs(weights[0][e])));
  }
  CHECK(worst < 1e-6 * largest);
}
