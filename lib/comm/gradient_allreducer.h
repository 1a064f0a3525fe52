// GradientAllreducer: sums a rank's flat gradient buffer over all ranks on the CommThread, so
// that the compute thread only waits where the algorithm needs the result. The buffer may live
// on the host or on a GPU; a GradientTransport does the summing (gradient_transport.h).
#pragma once
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "comm/comm.h"                // Comm
#include "comm/comm_thread.h"         // CommThread
#include "comm/gradient_transport.h"  // GradientTransport
#include "core/tensor.h"

namespace dtrain {

class Backend;

// Where the gradients live and how GPU buffers travel (cluster.comm).
struct GradientPlacement {
  Backend* backend = nullptr;  // null or a CPU backend: host buffers
  std::string transport = "auto";
};

class GradientAllreducer {
 public:
  // Works on its own duplicate of `comm` (a collective call: every rank constructs one at the
  // same point), so that its collectives, running on the comm thread, never interleave with
  // collectives the compute thread issues on `comm` meanwhile (metrics, evaluation).
  GradientAllreducer(Comm& comm, const std::string& codec, int64_t max_elements,
                     const GradientPlacement& placement = {});
  ~GradientAllreducer();
  // Starts summing `buffer` (f32, on the placement's device) over the ranks; in place. Called
  // on the compute thread after the work producing `buffer` was issued.
  std::future<void> start(const Tensor& buffer);
  // The halves of start() for sharded training (GradientTransport::reduce_scatter, all_gather):
  // block rank() of `buffer` (ring_block) summed, or every rank's block copied to all.
  // `after`, if given, runs on the comm thread once the reduce-scatter is done (a sharded run
  // gives back the memory of the blocks it does not own).
  std::future<void> start_reduce_scatter(const Tensor& buffer, std::function<void()> after = {});
  std::future<void> start_all_gather(const Tensor& buffer);
  // Runs `task` on the comm thread after the reductions started before it, with the all-reducer's
  // own communicator: small control collectives that must follow a reduction in every rank's
  // order (HPSGD's agreement on when to synchronise next). Its time counts as comm_s.
  std::future<void> then(std::function<void(Comm&)> task);
  // What it uses, for the log: "MPI_Allreduce" or "ring all-reduce + quantize8".
  std::string describe() const;
  // Seconds spent communicating and compressing since the last call (comm_s excludes
  // compress_s), then reset.
  void take_times(double* comm_s, double* compress_s);

 private:
  using Collective = double (GradientTransport::*)(const Tensor&, const std::shared_ptr<void>&);
  std::future<void> submit(Collective collective, const Tensor& buffer,
                           std::function<void()> after = {});

  std::unique_ptr<Comm> comm_;
  std::unique_ptr<GradientTransport> transport_;
  std::mutex mutex_;
  double compress_s_ = 0;
  // Last: destroyed first, its thread joined (running what is queued) while the members the
  // queued reductions use still exist.
  CommThread thread_;
};

}  // namespace dtrain
