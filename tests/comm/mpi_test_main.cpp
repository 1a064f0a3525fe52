// doctest runner for tests that run under mpirun: every rank runs every test case; the exit
// code is non-zero on every rank if any rank failed, and only rank 0 prints the summary.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include "comm/mpi_comm.h"

#ifdef DTRAIN_TEST_NEEDS_GPU
#include <cstdio>
#include <cstdlib>  // getenv
#include <string>

#include "backend/cuda/cuda_backend.h"  // cuda_device_usable
#endif

int main(int argc, char** argv) {
  dtrain::init_mpi(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#ifdef DTRAIN_TEST_NEEDS_GPU
  // CTest's SKIP_RETURN_CODE: every rank of one machine reaches the same verdict. With
  // DTRAIN_REQUIRE_CUDA set (not 0), as on the GPU machine, a missing GPU fails instead.
  std::string why;
  if (!dtrain::cuda_device_usable(0, &why)) {
    const char* require = std::getenv("DTRAIN_REQUIRE_CUDA");
    const bool required = require && std::string(require) != "0";
    if (rank == 0)
      std::printf("%s: no usable CUDA GPU (%s)\n", required ? "FAIL" : "skipped", why.c_str());
    return required ? 1 : 77;
  }
#endif
  doctest::Context context(argc, argv);
  if (rank != 0) context.setOption("minimal", true);
  int failed = context.run() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}
