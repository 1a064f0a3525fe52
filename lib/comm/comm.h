// Comm: how ranks talk (docs/architecture.md, decision 3). The trainer and the schedulers see only
// this interface; MpiComm is the implementation for host memory, LocalComm the one-process case,
// and an NCCL one (device buffers) comes with the CUDA backend. Compute threads do not call these
// directly during training: requests go through a CommThread, in issue order.
#pragma once
#include <cstddef>  // size_t
#include <cstdint>
#include <memory>
#include <optional>  // probe_any: a message may or may not be there
#include <string>
#include <vector>

#include "core/tensor.h"  // Tensor: buffers of the gradient collectives

namespace dtrain {

// A non-blocking operation in flight; wait() completes it (also done by the destructor).
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;  // true once complete
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  // This rank's position among the ranks of its node, and their number: local rank → GPU.
  virtual int local_rank() const { return 0; }
  virtual int local_size() const { return 1; }
  // True when messages are paced to an emulated link (cluster.link): transports that bypass
  // this Comm (NCCL) would bypass the emulation too.
  virtual bool emulates_link() const { return false; }
  // The same ranks without the emulated link: for the runner's own traffic that is not part of
  // training (clock alignment, trace files), which the emulation must not slow down.
  virtual Comm& unpaced() { return *this; }

  // ---- point to point (bytes; `tag` separates concurrent conversations) ----
  virtual void send(const void* data, size_t bytes, int peer, int tag) = 0;
  virtual void recv(void* data, size_t bytes, int peer, int tag) = 0;
  virtual std::unique_ptr<CommRequest> isend(const void* data, size_t bytes, int peer, int tag) = 0;
  virtual std::unique_ptr<CommRequest> irecv(void* data, size_t bytes, int peer, int tag) = 0;
  // The rank that sent a message with `tag` which has arrived and is not received yet, if any;
  // never blocks (receive the message with recv). A server answering whoever asks polls this
  // with a sleep in between instead of spinning inside a blocking MPI_Recv.
  virtual std::optional<int> probe_any(int tag);
  // Lets pending non-blocking transfers advance (MPI has no progress thread: a transfer moves only
  // inside MPI calls of both ranks); never blocks. A no-op where transfers need no help.
  virtual void progress() {}
  // Send to `dst` and receive from `src` at once (deadlock-free ring steps).
  virtual void sendrecv(const void* send_data, size_t send_bytes, int dst, void* recv_data,
                        size_t recv_bytes, int src, int tag) = 0;

  // ---- collectives ----
  virtual void allreduce_sum(std::vector<double>& values) = 0;  // host, in place
  // The largest of the ranks' `*value`, without blocking: `*value` holds it once the request is
  // complete. Default: done at once (one process).
  virtual std::unique_ptr<CommRequest> iallreduce_max(double* value);
  // In-place sum of an f32 buffer with the library's own all-reduce (MPI_Allreduce); the ring
  // all-reduce with codecs is RingAllreduce, built on the point-to-point calls above.
  virtual void allreduce_sum(const Tensor& buffer) = 0;
  virtual void broadcast(std::string& bytes, int root) = 0;
  virtual void broadcast(const Tensor& buffer, int root) = 0;
  // Each rank contributes `row`; root receives all rows in rank order (others get nothing).
  virtual std::vector<std::vector<double>> gather(const std::vector<double>& row, int root) = 0;
  virtual void barrier() = 0;
  // A sub-communicator of the ranks passing the same `color`, ordered by `key`.
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;
  // Ends every rank now (no rank may wait forever on a dead one).
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// One process: collectives are the identity, point to point is an error.
std::unique_ptr<Comm> make_local_comm();

}  // namespace dtrain
