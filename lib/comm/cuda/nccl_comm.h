// NcclComm: the Comm of GPU buffers (docs/architecture.md: the comm module). Device
// memory travels through NCCL on the communicator's own stream; host memory and the small host
// collectives (metrics, consistency, configuration) go through the host Comm it was built from,
// which also carries NCCL's unique id at construction (an MPI broadcast under mpirun).
//
// The Comm calls are blocking, as everywhere: they return when the transfer is complete (a
// stream synchronisation of the comm thread, never of the compute stream). The enqueue_*
// calls only enqueue, for code that chains several steps on stream() and synchronises once
// (the NCCL ring all-reduce with codecs).
#pragma once
#include <cuda_runtime_api.h>  // cudaStream_t
#include <nccl.h>              // ncclComm_t

#include <memory>

#include "comm/comm.h"  // Comm

namespace dtrain {

class NcclComm final : public Comm {
 public:
  // Collective over `host`'s ranks; `device` is this rank's GPU.
  NcclComm(std::unique_ptr<Comm> host, int device);
  ~NcclComm() override;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int local_rank() const override { return host_->local_rank(); }
  int local_size() const override { return host_->local_size(); }
  std::string name() const override;

  // Device pointers go through NCCL, host pointers through the host Comm. NCCL matches sends
  // and receives in stream order: isend/irecv pairs that must progress together (both ranks
  // sending first) need sendrecv instead.
  void send(const void* data, size_t bytes, int peer, int tag) override;
  void recv(void* data, size_t bytes, int peer, int tag) override;
  std::unique_ptr<CommRequest> isend(const void* data, size_t bytes, int peer, int tag) override;
  std::unique_ptr<CommRequest> irecv(void* data, size_t bytes, int peer, int tag) override;
  void sendrecv(const void* send_data, size_t send_bytes, int dst, void* recv_data,
                size_t recv_bytes, int src, int tag) override;

  void allreduce_sum(std::vector<double>& values) override { host_->allreduce_sum(values); }
  void allreduce_sum(const Tensor& buffer) override;  // ncclAllReduce for device tensors
  void broadcast(std::string& bytes, int root) override { host_->broadcast(bytes, root); }
  void broadcast(const Tensor& buffer, int root) override;
  std::vector<std::vector<double>> gather(const std::vector<double>& row, int root) override {
    return host_->gather(row, root);
  }
  void barrier() override { host_->barrier(); }
  std::unique_ptr<Comm> split(int color, int key) override;
  [[noreturn]] void abort(int exit_code) override;

  // ---- enqueue only (device pointers, on stream()) ----
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  void enqueue_allreduce_sum(float* data, int64_t n);
  // The halves of an all-reduce on the ring's blocks (ring_allreduce.h: ring_block, which need
  // not be of equal size, so no ncclReduceScatter): block r of data[0, n) summed onto rank r (one
  // ncclReduce per block, grouped), and every block r copied from rank r (one ncclBroadcast each).
  void enqueue_reduce_scatter_blocks(float* data, int64_t n);
  void enqueue_all_gather_blocks(float* data, int64_t n);
  void enqueue_sendrecv(const void* send_data, size_t send_bytes, int dst, void* recv_data,
                        size_t recv_bytes, int src);
  // Waits for everything enqueued on stream(); reports NCCL's asynchronous errors.
  void synchronize();

 private:
  template <class PerBlock>
  void enqueue_per_block(float* data, int64_t n, PerBlock per_block);

  std::unique_ptr<Comm> host_;
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// True when `p` is device (or managed) memory that NCCL can use.
bool is_device_pointer(const void* p);

}  // namespace dtrain
