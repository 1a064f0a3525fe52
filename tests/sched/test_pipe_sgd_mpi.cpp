// Pipe-SGD on 2 and 4 ranks: K = 1 is sync bit for bit; with K = 2 every rank holds identical
// weights after every iteration (any codec, one or several gradient segments), and p ranks
// equal one rank with the same global batch.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "comm/mpi_comm.h"
#include "trainee.h"

using namespace dtrain;
using test::Trainee;
using test::TraineeOptions;

namespace {

TraineeOptions pipe_sgd(int K, const char* compression, int segments = 1) {
  TraineeOptions o;
  o.algorithm = "pipe_sgd";
  o.compression = compression;
  o.keys = fmt::format("K: {}, segments: {}", K, segments);
  return o;
}

// True when this rank's weights equal rank 0's bit for bit, on every rank.
bool identical_on_all_ranks(Comm& comm, const Trainee& t) {
  Tensor root = Tensor::empty({t.size()});
  std::memcpy(root.raw(), t.weights(), root.bytes());
  comm.broadcast(root, 0);
  std::vector<double> differ{std::memcmp(root.raw(), t.weights(), root.bytes()) != 0 ? 1.0 : 0.0};
  comm.allreduce_sum(differ);
  return differ[0] == 0;
}

}  // namespace

TEST_CASE("pipe_sgd with K = 1 equals sync on p ranks") {
  auto world = make_mpi_comm();
  for (const char* compression : {"none", "quantize8"}) {
    CAPTURE(compression);
    Trainee pipe(*world, pipe_sgd(1, compression));
    TraineeOptions so;
    so.compression = compression;
    Trainee sync(*world, so);
    pipe.start_epoch(0);
    sync.start_epoch(0);
    pipe.train(0, 12);
    sync.train(0, 12);
    CHECK(std::memcmp(pipe.weights(), sync.weights(), pipe.size() * 4) == 0);
  }
}

TEST_CASE("pipe_sgd with K = 2 keeps every rank's weights identical after every iteration") {
  auto world = make_mpi_comm();
  for (const char* compression : {"none", "truncate16", "quantize8"})
    for (int segments : {1, 3}) {
      CAPTURE(compression);
      CAPTURE(segments);
      Trainee pipe(*world, pipe_sgd(2, compression, segments));
      pipe.start_epoch(0);
      for (int i = 0; i < 10; ++i) {
        CAPTURE(i);
        pipe.train(0, 1);
        REQUIRE(identical_on_all_ranks(*world, pipe));
      }
      pipe.sched->flush();
      CHECK(identical_on_all_ranks(*world, pipe));
    }
}

TEST_CASE("pipe_sgd with K = 2 on p ranks equals one rank with the same global batch") {
  auto world = make_mpi_comm();
  auto local = make_local_comm();
  for (int segments : {1, 4}) {
    CAPTURE(segments);
    Trainee parallel(*world, pipe_sgd(2, "none", segments));
    Trainee single(*local, pipe_sgd(2, "none"));
    parallel.start_epoch(0);
    single.start_epoch(0);
    parallel.train(0, 15);
    single.train(0, 15);
    parallel.sched->flush();
    single.sched->flush();
    CHECK(test::max_difference(parallel.weights(), single.weights(), single.size()) < 1e-4);
  }
}
