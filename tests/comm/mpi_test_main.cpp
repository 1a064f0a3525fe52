// doctest runner for tests that run under mpirun: every rank runs every test case; the exit
// code is non-zero on every rank if any rank failed, and only rank 0 prints the summary.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include "comm/mpi_comm.h"

int main(int argc, char** argv) {
  dtrain::init_mpi(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  doctest::Context context(argc, argv);
  if (rank != 0) context.setOption("minimal", true);
  int failed = context.run() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}
