// GradientTransport: how one gradient buffer is summed over the ranks, wherever it lives.
// GradientAllreducer runs it on the CommThread. The host transport works on host memory (MPI or
// the ring with a codec); the CUDA ones (comm/cuda/) take device buffers either through NCCL on
// their own stream or staged through pinned host memory for MPI. Device work is ordered after
// the compute stream with an event (mark_ready), never by synchronising the compute thread.
#pragma once
#include <cstdint>
#include <memory>  // shared_ptr: the ready marker travels to the comm thread
#include <string>

#include "comm/comm.h"    // Comm
#include "core/tensor.h"  // Tensor

namespace dtrain {

class Backend;

class GradientTransport {
 public:
  virtual ~GradientTransport() = default;
  // For the log: "MPI_Allreduce", "ring all-reduce + quantize8", "NCCL all-reduce", ...
  virtual std::string describe() const = 0;
  // On the compute thread, once the work producing `buffer` has been issued: what the comm
  // thread must wait for before reading it (a CUDA event on the compute stream); null for host
  // memory, which is final when the compute thread gets here.
  virtual std::shared_ptr<void> mark_ready(const Tensor& buffer) { return nullptr; }
  // On the comm thread: sums `buffer` over the ranks in place and returns when the result is in
  // `buffer`. Returns the seconds spent encoding and decoding.
  virtual double reduce(const Tensor& buffer, const std::shared_ptr<void>& ready) = 0;
  // The halves of reduce() for sharded training (ZeRO), on the ring's blocks (ring_block:
  // block r of the buffer is rank r's). reduce_scatter leaves block rank() of `buffer` exactly as
  // reduce() would (the other blocks hold partial sums); all_gather copies every rank's block r
  // into everyone's buffer, uncompressed. Same return and ordering as reduce().
  virtual double reduce_scatter(const Tensor& buffer, const std::shared_ptr<void>& ready) = 0;
  virtual double all_gather(const Tensor& buffer, const std::shared_ptr<void>& ready) = 0;
};

// Host f32 buffers over `comm` (which the transport keeps using; the caller keeps it alive):
// MPI_Allreduce without compression, the ring all-reduce with the codec otherwise; the halves
// always by the ring (one order of sums for every shard mode). `max_elements`: the largest buffer.
std::unique_ptr<GradientTransport> make_host_transport(Comm& comm, const std::string& codec,
                                                       int64_t max_elements);

// Whether every rank of `comm` can put its gradients on NCCL: all use a GPU (`backend`, null
// for a host rank), each a different one (host name and PCI bus id are compared), and no link
// is emulated (NCCL would bypass the pacing). Collective: every rank calls it, GPU or not, and
// all get the same answer. `choice` is cluster.comm (auto | nccl | mpi): "mpi" votes no, and
// "nccl" where NCCL cannot work is an InputError saying why.
bool nccl_usable_everywhere(Comm& comm, Backend* backend, const std::string& choice);

// Buffers of `backend`'s device: through NCCL when `use_nccl` (nccl_usable_everywhere), else
// staged through pinned host memory for the host transport. `comm` must stay alive.
std::unique_ptr<GradientTransport> make_device_transport(Comm& comm, Backend& backend,
                                                         const std::string& codec,
                                                         int64_t max_elements, bool use_nccl);

}  // namespace dtrain
