// The gradient all-reduce on GPU buffers, on however many ranks mpirun started: every transport
// (host staging for MPI; NCCL when each rank has a GPU of its own) and codec gives exactly the
// host path's result, and the reduction waits for device work still queued on the compute
// stream. Skipped (exit 77) without a usable GPU.
#include <doctest/doctest.h>

#include <cstring>  // memcmp
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"  // make_cuda_backend, cuda_device_count
#include "comm/gradient_allreducer.h"
#include "comm/mpi_comm.h"
#include "comm/ring_allreduce.h"  // ring_block
#include "core/rng.h"

using namespace dtrain;

namespace {

// Gradient-like values that differ per rank.
std::vector<float> local_values(int rank, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 1e-2f * random_normal(5, 100 + rank, i);
  return v;
}

std::vector<std::string> transports(Comm& comm) {
  std::vector<std::string> names{"mpi"};
  // NCCL refuses two ranks on one GPU; the vote must be the same on every rank.
  std::vector<double> short_of_gpus{comm.local_size() > cuda_device_count() ? 1.0 : 0.0};
  comm.allreduce_sum(short_of_gpus);
  if (short_of_gpus[0] == 0) names.push_back("nccl");
  return names;
}

}  // namespace

TEST_CASE("GPU gradient all-reduce equals the host one bit for bit, every transport and codec") {
  auto comm = make_mpi_comm();
  auto backend = make_cuda_backend(comm->local_rank());
  const int64_t n = 100003;  // odd: uneven ring blocks
  const std::vector<float> mine = local_values(comm->rank(), n);
  for (const std::string codec : {"none", "truncate16", "quantize8"}) {
    // The host reference, through the CPU path.
    std::vector<float> expected = mine;
    GradientAllreducer host(*comm, codec, n);
    host.start(Tensor::borrow(expected.data(), Shape{n})).get();
    for (const std::string& transport : transports(*comm)) {
      CAPTURE(codec);
      CAPTURE(transport);
      GradientAllreducer device(*comm, codec, n, {backend.get(), transport});
      Tensor buffer = backend->empty({n});
      backend->copy(buffer, Tensor::borrow(const_cast<float*>(mine.data()), Shape{n}));
      device.start(buffer).get();
      std::vector<float> got(n);
      backend->copy(Tensor::borrow(got.data(), Shape{n}), buffer);
      backend->synchronize();
      if (codec == "none" && transport == "nccl") {
        // NCCL sums in its own order: equal up to float rounding.
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i)
          wrong += std::abs(got[i] - expected[i]) > 1e-6f * (1 + std::abs(expected[i]));
        CHECK(wrong == 0);
      } else {
        CHECK(std::memcmp(got.data(), expected.data(), n * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("GPU reduce-scatter and all-gather equal the host halves, every transport and codec") {
  auto comm = make_mpi_comm();
  auto backend = make_cuda_backend(comm->local_rank());
  const int64_t n = 100003;  // odd: uneven ring blocks
  const std::vector<float> mine = local_values(comm->rank(), n);
  const RingBlock own = ring_block(n, comm->rank(), comm->size());
  for (const std::string codec : {"none", "truncate16", "quantize8"}) {
    std::vector<float> expected = mine;
    GradientAllreducer host(*comm, codec, n);
    host.start_reduce_scatter(Tensor::borrow(expected.data(), Shape{n})).get();
    for (const std::string& transport : transports(*comm)) {
      CAPTURE(codec);
      CAPTURE(transport);
      GradientAllreducer device(*comm, codec, n, {backend.get(), transport});
      Tensor buffer = backend->empty({n});
      backend->copy(buffer, Tensor::borrow(const_cast<float*>(mine.data()), Shape{n}));
      device.start_reduce_scatter(buffer).get();
      std::vector<float> got(n);
      backend->copy(Tensor::borrow(got.data(), Shape{n}), buffer);
      backend->synchronize();
      int64_t wrong = 0;
      for (int64_t i = own.begin; i < own.begin + own.count; ++i)
        wrong += codec == "none" && transport == "nccl"  // NCCL's own order of sums
                     ? std::abs(got[i] - expected[i]) > 1e-6f * (1 + std::abs(expected[i]))
                     : got[i] != expected[i];
      CHECK(wrong == 0);
      // The all-gather copies: every rank's block arrives unchanged, over whatever the others
      // held there.
      std::vector<float> mark(n), whole(n);
      for (int64_t i = 0; i < n; ++i) {
        whole[i] = static_cast<float>(i % 1000);
        const bool owned = i >= own.begin && i < own.begin + own.count;
        mark[i] = owned ? whole[i] : -1.0f - comm->rank();
      }
      backend->copy(buffer, Tensor::borrow(mark.data(), Shape{n}));
      device.start_all_gather(buffer).get();
      backend->copy(Tensor::borrow(got.data(), Shape{n}), buffer);
      backend->synchronize();
      CHECK(std::memcmp(got.data(), whole.data(), n * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("the all-reduce starts after compute-stream work that is still queued") {
  auto comm = make_mpi_comm();
  auto backend = make_cuda_backend(comm->local_rank());
  const int64_t n = 1 << 22;  // large enough that the fill is still running when start() is called
  for (const std::string& transport : transports(*comm)) {
    CAPTURE(transport);
    GradientAllreducer device(*comm, "none", n, {backend.get(), transport});
    Tensor buffer = backend->empty({n});
    for (int round = 0; round < 3; ++round) {
      backend->fill(buffer, static_cast<float>(comm->rank() + 1 + round));  // only enqueued
      device.start(buffer).get();
      std::vector<float> got(n);
      backend->copy(Tensor::borrow(got.data(), Shape{n}), buffer);
      backend->synchronize();
      const int p = comm->size();
      const float expect = static_cast<float>(p * (p + 1) / 2 + p * round);
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += got[i] != expect;
      CHECK(wrong == 0);
    }
  }
}
