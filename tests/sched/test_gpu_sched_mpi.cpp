// Every scheduler runs unchanged on the CUDA backend: on however many ranks mpirun
// started (ranks share the GPU through host staging, or use NCCL with a GPU each), 12
// iterations on the GPU follow the same run on the CPU closely, and all ranks end with
// bit-identical weights. Skipped (exit 77) without a usable GPU.
#include <doctest/doctest.h>

#include <cstring>  // memcmp

#include "comm/mpi_comm.h"
#include "sched/gossip/gossip_scheduler.h"  // GossipScheduler: exchange counters
#include "trainee.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

std::vector<float> train_12(Comm& comm, TraineeOptions o) {
  Trainee t(comm, o);
  t.start_epoch(0);
  t.train(0, 12);
  t.sched->flush();
  return t.host_weights();
}

}  // namespace

TEST_CASE("every built scheduler on the GPU follows the CPU and agrees across ranks") {
  auto comm = make_mpi_comm();
  for (const std::string algorithm :
       {"sync", "ps_sync", "pipe_sgd", "local_sgd", "hpsgd", "sapipe"}) {
    for (const std::string codec : {"none", "quantize8"}) {
      CAPTURE(algorithm);
      CAPTURE(codec);
      TraineeOptions o;
      o.algorithm = algorithm;
      o.compression = codec;
      if (algorithm == "sync") o.keys = "segments: 3";  // overlapped with backward
      if (algorithm == "local_sgd") o.keys = "sync_period: 3";
      if (algorithm == "hpsgd") o.keys = "sync_period: 3", o.momentum = 0;  // plain SGD only
      // Prediction and delay compensation run through the backend (dot, sgd_predict).
      if (algorithm == "sapipe") o.keys = "stale_layers: 1, compensation: wp3";
      const std::vector<float> cpu = train_12(*comm, o);
      o.device = "cuda";
      const std::vector<float> gpu = train_12(*comm, o);
      const int64_t n = static_cast<int64_t>(gpu.size());
      REQUIRE(cpu.size() == gpu.size());
      // GEMM summation order differs between cuBLAS and oneDNN; a quantised gradient can
      // round one step differently, hence the looser bound with quantize8.
      CHECK(max_difference(cpu.data(), gpu.data(), n) < (codec == "none" ? 1e-4 : 2e-3));
      // Rank 0's weights, broadcast, equal every rank's bit for bit.
      std::vector<float> root = gpu;
      comm->broadcast(Tensor::borrow(root.data(), Shape{n}), 0);
      CHECK(std::memcmp(root.data(), gpu.data(), n * sizeof(float)) == 0);
    }
  }
}

TEST_CASE(
    "the decentralized schedulers on the GPU: d_psgd follows the CPU, gossip ends its "
    "epochs and serves every exchange") {
  auto comm = make_mpi_comm();
  TraineeOptions o;
  o.algorithm = "d_psgd";
  o.keys = "topology: ring";
  const std::vector<float> cpu = train_12(*comm, o);
  o.device = "cuda";
  const std::vector<float> gpu = train_12(*comm, o);
  REQUIRE(cpu.size() == gpu.size());
  CHECK(max_difference(cpu.data(), gpu.data(), static_cast<int64_t>(gpu.size())) < 1e-4);

  // hpsgd with `auto`: when rounds start depends on timing, so the GPU run is not compared with
  // the CPU's; the ranks' models must agree after the final merge.
  o.algorithm = "hpsgd";
  o.keys = "sync_period: auto";
  o.momentum = 0;
  const std::vector<float> hp = train_12(*comm, o);
  std::vector<float> root = hp;
  comm->broadcast(Tensor::borrow(root.data(), Shape{static_cast<int64_t>(root.size())}), 0);
  CHECK(std::memcmp(root.data(), hp.data(), hp.size() * sizeof(float)) == 0);
  o.momentum = test::kMomentum;

  if (comm->size() % 2 != 0) return;
  o.algorithm = "gossip";
  o.keys = "topology: ring";
  // 100 updates an epoch (as the CPU test): with fewer, rank 0 alone could end both epochs before
  // the active rank's first exchange on a loaded machine.
  o.train_size = 2400;
  Trainee t(*comm, o);
  for (int epoch = 0; epoch < 2; ++epoch) {
    t.start_epoch(epoch);
    t.train(epoch, 0);
  }
  auto& g = dynamic_cast<GossipScheduler&>(*t.sched);
  std::vector<double> counts{static_cast<double>(g.exchanges_started()),
                             static_cast<double>(g.exchanges_served())};
  comm->allreduce_sum(counts);
  CHECK(counts[0] == counts[1]);
  CHECK(counts[0] > 0);
}

TEST_CASE("pipedream on the GPU: each rank's stage follows the CPU's") {
  auto comm = make_mpi_comm();
  // One stage per rank (the MLP cut before fc2 on two ranks), 1f1b with weight stashing;
  // activations and gradients travel through host copies.
  auto stage_weights = [&](const std::string& device) {
    TraineeOptions o;
    o.algorithm = "pipedream";
    o.keys = comm->size() == 1 ? "stages: []" : "stages: [fc2]";
    o.device = device;
    Trainee t(*comm, o);
    t.start_epoch(0);
    t.train(0, 12);
    SchedulerState state;
    t.sched->save(state);
    for (const auto& [name, values] : state.buffers())
      if (name == "pipedream.stage.parameters") return values;
    FAIL("no stage parameters saved");
    return std::vector<float>{};
  };
  const std::vector<float> cpu = stage_weights("cpu");
  const std::vector<float> gpu = stage_weights("cuda");
  REQUIRE(cpu.size() == gpu.size());
  CHECK(max_difference(cpu.data(), gpu.data(), static_cast<int64_t>(gpu.size())) < 1e-4);
}
