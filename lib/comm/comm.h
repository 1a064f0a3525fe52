// Comm: how ranks talk. The trainer and the schedulers see only this interface; the MPI and
// NCCL implementations arrive with the communication issues, LocalComm is the one-process case.
// Collectives here are the small host-side ones the runner needs (metrics, consistency);
// gradient all-reduce on device buffers goes through the same object.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"  // Tensor: device buffers for the gradient collectives

namespace dtrain {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;

  // In-place element-wise sum over all ranks of a host vector.
  virtual void allreduce_sum(std::vector<double>& values) = 0;
  // In-place sum of an f32 buffer (gradients).
  virtual void allreduce_sum(const Tensor& buffer) = 0;
  // Rank `root`'s bytes to everyone.
  virtual void broadcast(std::string& bytes, int root) = 0;
  virtual void broadcast(const Tensor& buffer, int root) = 0;
  // Each rank contributes `row`; root receives all rows in rank order (others get nothing).
  virtual std::vector<std::vector<double>> gather(const std::vector<double>& row, int root) = 0;
  virtual void barrier() = 0;
  // Ends every rank now, after `message` was printed (no rank may wait forever on a dead one).
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// One process: every collective is the identity.
std::unique_ptr<Comm> make_local_comm();

}  // namespace dtrain
