// MPI implementation of Comm (Open MPI from Debian). MPI is initialised with
// MPI_THREAD_MULTIPLE so that the comm thread and the main thread may both call it.
#pragma once
#include <memory>

#include "comm/comm.h"  // Comm

namespace dtrain {

// True when this process was started by mpirun/mpiexec (so MPI should be initialised).
bool launched_under_mpi();
// Initialises MPI once (thread-multiple; an InputError-free runtime Error if the library lacks
// it) and finalises it at exit. Safe to call more than once.
void init_mpi(int* argc, char*** argv);
// MPI_COMM_WORLD as a Comm (init_mpi first).
std::unique_ptr<Comm> make_mpi_comm();

}  // namespace dtrain
