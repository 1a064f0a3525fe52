// optimizer.clip_grad_norm in every algorithm that clips: with a max norm far below the
// gradient's, one SGD step (no momentum, no weight decay) moves the weights by
// −lr · g · max_norm / (‖g‖ + 1e-6), g the step's gradient computed by hand here (one rank: the
// all-reduced and the local gradient are the same; tests/sched/test_clip_mpi.cpp tells them
// apart).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "trainee.h"

using namespace dtrain;

using test::Trainee;
using test::TraineeOptions;

TEST_CASE("each clipping algorithm steps along g / |g| * max_norm") {
  auto local = make_local_comm();
  constexpr double kMaxNorm = 1e-3;
  // pipe_sgd with K = 1: the gradient is applied in its own iteration (test_clip_mpi.cpp: K = 2).
  for (const std::string algorithm :
       {"sync", "ps_sync", "pipe_sgd", "local_sgd", "d_psgd", "gossip"}) {
    CAPTURE(algorithm);
    TraineeOptions o;
    o.algorithm = algorithm;
    if (algorithm == "pipe_sgd") o.keys = "K: 1";
    o.momentum = 0;
    o.weight_decay = 0;
    Trainee reference(*local, o);  // unclipped: its model computes the gradient by hand
    o.optimizer_keys = "clip_grad_norm: 0.001";
    Trainee clipped(*local, o);
    const std::vector<float> w0 = clipped.host_weights();
    clipped.start_epoch(0);
    clipped.train(0, 1);
    const std::vector<float> w1 = clipped.host_weights();

    reference.start_epoch(0);
    const float* g = test::gradient_at(reference, w0, /*mean=*/true);
    double squares = 0;
    for (int64_t e = 0; e < reference.size(); ++e) squares += double(g[e]) * g[e];
    const double norm = std::sqrt(squares);
    REQUIRE(norm > 10 * kMaxNorm);  // the clip bites
    const double coefficient = kMaxNorm / (norm + 1e-6);
    double error = 0, step = 0;
    for (int64_t e = 0; e < reference.size(); ++e) {
      const double expected = -double(test::kLr) * coefficient * g[e];
      const double moved = double(w1[e]) - w0[e];
      error += (moved - expected) * (moved - expected);
      step += moved * moved;
    }
    // The step is lr · max_norm long and points along −g.
    CHECK(std::sqrt(step) == doctest::Approx(test::kLr * kMaxNorm).epsilon(1e-3));
    CHECK(std::sqrt(error) < 1e-3 * std::sqrt(step));
  }
}
