// Data-parallel equivalence: `sync` on p ranks with global batch B gives the same
// weights, to float tolerance, as one rank with batch B on the same data order — with the
// ring all-reduce (truncate16 excluded: lossy) and with MPI_Allreduce; the same for ps_sync.
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>

#include "comm/mpi_comm.h"
#include "trainee.h"

using namespace dtrain;

using test::Trainee;
using test::TraineeOptions;

TEST_CASE("sync and ps_sync on p ranks equal one rank with the same global batch") {
  auto world = make_mpi_comm();
  auto local = make_local_comm();
  for (const char* algorithm : {"sync", "ps_sync"})
    for (const char* compression : {"none", "quantize8"}) {
      CAPTURE(algorithm);
      CAPTURE(compression);
      TraineeOptions o;
      o.algorithm = algorithm;
      o.compression = compression;
      Trainee parallel(*world, o);
      parallel.start_epoch(0);
      parallel.train(0, 12);
      // Every rank holds the same weights.
      const Tensor& w = parallel.model->parameters();
      std::vector<double> sum{0.0};
      for (int64_t i = 0; i < w.numel(); ++i) sum[0] += w.data<float>()[i] * (1 + i % 7);
      const double mine = sum[0];
      world->allreduce_sum(sum);
      CHECK(sum[0] == doctest::Approx(mine * world->size()).epsilon(1e-12));
      if (std::string(compression) != "none") continue;  // lossy: not equal to one rank
      Trainee single(*local, {});
      single.start_epoch(0);
      single.train(0, 12);
      CHECK(test::max_difference(parallel.weights(), single.weights(), w.numel()) < 1e-4);
    }
}

TEST_CASE("sync with AdamW, the gradient clipped or not, on p ranks equals one rank") {
  auto world = make_mpi_comm();
  auto local = make_local_comm();
  // eps well above the float noise of a near-zero gradient, whose sign AdamW's first steps
  // would otherwise amplify to a whole lr.
  std::vector<float> unclipped;
  for (const char* clip : {"0", "0.05"}) {
    CAPTURE(clip);
    TraineeOptions o;
    o.optimizer = "adamw";
    o.lr = 0.01f;
    o.weight_decay = 0.1f;
    o.optimizer_keys = std::string("eps: 1e-3, clip_grad_norm: ") + clip;
    Trainee parallel(*world, o);
    parallel.start_epoch(0);
    const EpochStats first = parallel.train(0, 6);
    const EpochStats later = parallel.train(0, 6);
    Trainee single(*local, o);
    single.start_epoch(0);
    single.train(0, 12);
    const int64_t n = parallel.model->num_parameters();
    CHECK(test::max_difference(parallel.weights(), single.weights(), n) < 1e-5);
    // It learns: the loss of the later iterations is below the first ones'.
    CHECK(later.loss_sum / later.samples < first.loss_sum / first.samples);
    // A clip of 0.05 bites: the weights differ from the unclipped run's.
    if (unclipped.empty())
      unclipped = parallel.host_weights();
    else
      CHECK(test::max_difference(parallel.weights(), unclipped.data(), n) > 1e-4);
  }
}
