// GradientAllreducer: sums a rank's flat gradient buffer over all ranks on the CommThread, so
// that the compute thread only waits where the algorithm needs the result. With a codec it runs
// the ring all-reduce with the codec inside; without one it uses MPI_Allreduce, which Open MPI
// tunes per message size and which measured faster than our uncompressed ring here.
#pragma once
#include <future>
#include <memory>
#include <string>

#include "comm/comm.h"            // Comm
#include "comm/comm_thread.h"     // CommThread
#include "comm/ring_allreduce.h"  // RingAllreduce
#include "compress/codec.h"       // Codec
#include "core/tensor.h"

namespace dtrain {

class GradientAllreducer {
 public:
  // Works on its own duplicate of `comm` (a collective call: every rank constructs one at the
  // same point), so that its collectives, running on the comm thread, never interleave with
  // collectives the compute thread issues on `comm` meanwhile (metrics, evaluation).
  GradientAllreducer(Comm& comm, const std::string& codec, int64_t max_elements);
  // Starts summing `buffer` (host f32) over the ranks; in place.
  std::future<void> start(const Tensor& buffer);
  // What it uses, for the log: "MPI_Allreduce" or "ring all-reduce + quantize8".
  std::string describe() const;
  // Seconds spent communicating and compressing since the last call (comm_s excludes
  // compress_s), then reset.
  void take_times(double* comm_s, double* compress_s);

 private:
  std::unique_ptr<Comm> comm_;
  std::unique_ptr<Codec> codec_;
  std::unique_ptr<RingAllreduce> ring_;  // null: MPI_Allreduce
  CommThread thread_;
  std::mutex mutex_;
  double compress_s_ = 0;
};

}  // namespace dtrain
