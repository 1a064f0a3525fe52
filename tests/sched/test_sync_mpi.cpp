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
