#include "comm/cuda/nccl_comm.h"

#include "comm/ring_allreduce.h"  // ring_block

#include <chrono>   // microseconds: the polling nap
#include <cstdlib>  // exit
#include <cstring>  // memcpy: the unique id through a string broadcast
#include <thread>   // yield, sleep_for

#include "backend/cuda/cuda_check.h"    // DTRAIN_CUDA_CHECK
#include "backend/cuda/cuda_context.h"  // set_device
#include "comm/cuda/nccl_check.h"
#include "comm/wait_watchdog.h"  // WaitGuard
#include "core/timer.h"          // Clock, seconds_since

namespace dtrain {
namespace {

// A point-to-point transfer in flight on the communicator's stream.
class NcclRequest final : public CommRequest {
 public:
  NcclRequest(cudaStream_t stream, int device) : device_(device) {
    DTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    DTRAIN_CUDA_CHECK(cudaEventRecord(done_, stream));
  }
  ~NcclRequest() override {
    if (done_) {
      cudaEventSynchronize(done_);
      cudaEventDestroy(done_);
    }
  }
  void wait() override {
    cuda::set_device(device_);
    WaitGuard guard("an NCCL transfer", -1);  // bounded by cluster.timeout_s
    DTRAIN_CUDA_CHECK(cudaEventSynchronize(done_));
  }
  bool test() override {
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaErrorNotReady) return false;
    DTRAIN_CUDA_CHECK(status);
    return true;
  }

 private:
  int device_;
  cudaEvent_t done_ = nullptr;
};

class DoneRequest final : public CommRequest {
 public:
  void wait() override {}
  bool test() override { return true; }
};

}  // namespace

bool is_device_pointer(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // an unregistered host pointer on old runtimes: not an error
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

NcclComm::NcclComm(std::unique_ptr<Comm> host, int device)
    : host_(std::move(host)), device_(device) {
  cuda::set_device(device_);
  ncclUniqueId id{};
  if (host_->rank() == 0) {
    DTRAIN_NCCL_CHECK(ncclGetUniqueId(&id));
  }
  std::string bytes(reinterpret_cast<const char*>(&id), sizeof id);
  host_->broadcast(bytes, 0);
  DTRAIN_CHECK(bytes.size() == sizeof id) << "NCCL unique id of " << bytes.size() << " bytes";
  std::memcpy(&id, bytes.data(), sizeof id);
  // Some MPI stacks progress a broadcast lazily; ncclCommInitRank blocks until every rank
  // arrives, so make sure the id has reached everyone first.
  host_->barrier();
  DTRAIN_NCCL_CHECK(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()));
  DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

NcclComm::~NcclComm() {
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  if (comm_) ncclCommDestroy(comm_);
}

std::string NcclComm::name() const {
  int version = 0;
  ncclGetVersion(&version);
  return "nccl " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
         " on GPU " + std::to_string(device_) + " (" + std::to_string(size()) + " ranks)";
}

void NcclComm::synchronize() {
  cuda::set_device(device_);
  // Poll rather than block: a peer that died leaves NCCL's kernels waiting forever, and only
  // its asynchronous error says so. Spin briefly (small messages finish in microseconds), then
  // nap so that the comm thread does not take a core from the compute thread.
  const auto start = Clock::now();
  WaitGuard guard("an NCCL operation", -1);  // bounded by cluster.timeout_s
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaSuccess) break;
    if (status != cudaErrorNotReady) {
      DTRAIN_CUDA_CHECK(status);
    }
    ncclResult_t async = ncclSuccess;
    DTRAIN_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      ncclCommAbort(comm_);  // ends the stuck kernels
      comm_ = nullptr;
      DTRAIN_NCCL_CHECK(async);
    }
    if (seconds_since(start) < 200e-6)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void NcclComm::enqueue_allreduce_sum(float* data, int64_t n) {
  if (n <= 0) return;
  cuda::set_device(device_);
  DTRAIN_NCCL_CHECK(
      ncclAllReduce(data, data, static_cast<size_t>(n), ncclFloat32, ncclSum, comm_, stream_));
}

// One grouped NCCL call per ring block c of data[0, n), rooted at rank c.
template <class PerBlock>
void NcclComm::enqueue_per_block(float* data, int64_t n, PerBlock per_block) {
  const int p = size();
  if (n <= 0 || p == 1) return;
  cuda::set_device(device_);
  DTRAIN_NCCL_CHECK(ncclGroupStart());
  ncclResult_t result = ncclSuccess;
  for (int c = 0; c < p && result == ncclSuccess; ++c) {
    const RingBlock b = ring_block(n, c, p);
    result = per_block(data + b.begin, static_cast<size_t>(b.count), c);
  }
  // The group is closed even when a call in it failed (see enqueue_sendrecv).
  DTRAIN_NCCL_CHECK(ncclGroupEnd());
  DTRAIN_NCCL_CHECK(result);
}

void NcclComm::enqueue_reduce_scatter_blocks(float* data, int64_t n) {
  enqueue_per_block(data, n, [&](float* block, size_t count, int root) {
    return ncclReduce(block, block, count, ncclFloat32, ncclSum, root, comm_, stream_);
  });
}

void NcclComm::enqueue_all_gather_blocks(float* data, int64_t n) {
  enqueue_per_block(data, n, [&](float* block, size_t count, int root) {
    return ncclBroadcast(block, block, count, ncclFloat32, root, comm_, stream_);
  });
}

void NcclComm::enqueue_sendrecv(const void* send_data, size_t send_bytes, int dst, void* recv_data,
                                size_t recv_bytes, int src) {
  cuda::set_device(device_);
  // One group: NCCL runs the send and the receive together, so a ring step cannot deadlock.
  // The group is closed even when a call in it fails, or every later NCCL call would be
  // taken into the broken group.
  DTRAIN_NCCL_CHECK(ncclGroupStart());
  ncclResult_t send = ncclSuccess, recv = ncclSuccess;
  if (send_bytes > 0) send = ncclSend(send_data, send_bytes, ncclUint8, dst, comm_, stream_);
  if (recv_bytes > 0) recv = ncclRecv(recv_data, recv_bytes, ncclUint8, src, comm_, stream_);
  const ncclResult_t end = ncclGroupEnd();
  DTRAIN_NCCL_CHECK(send);
  DTRAIN_NCCL_CHECK(recv);
  DTRAIN_NCCL_CHECK(end);
}

void NcclComm::send(const void* data, size_t bytes, int peer, int tag) {
  if (!is_device_pointer(data)) return host_->send(data, bytes, peer, tag);
  cuda::set_device(device_);
  if (bytes > 0) {
    DTRAIN_NCCL_CHECK(ncclSend(data, bytes, ncclUint8, peer, comm_, stream_));
  }
  synchronize();
}

void NcclComm::recv(void* data, size_t bytes, int peer, int tag) {
  if (!is_device_pointer(data)) return host_->recv(data, bytes, peer, tag);
  cuda::set_device(device_);
  if (bytes > 0) {
    DTRAIN_NCCL_CHECK(ncclRecv(data, bytes, ncclUint8, peer, comm_, stream_));
  }
  synchronize();
}

std::unique_ptr<CommRequest> NcclComm::isend(const void* data, size_t bytes, int peer, int tag) {
  if (!is_device_pointer(data)) return host_->isend(data, bytes, peer, tag);
  cuda::set_device(device_);
  if (bytes == 0) return std::make_unique<DoneRequest>();
  DTRAIN_NCCL_CHECK(ncclSend(data, bytes, ncclUint8, peer, comm_, stream_));
  return std::make_unique<NcclRequest>(stream_, device_);
}

std::unique_ptr<CommRequest> NcclComm::irecv(void* data, size_t bytes, int peer, int tag) {
  if (!is_device_pointer(data)) return host_->irecv(data, bytes, peer, tag);
  cuda::set_device(device_);
  if (bytes == 0) return std::make_unique<DoneRequest>();
  DTRAIN_NCCL_CHECK(ncclRecv(data, bytes, ncclUint8, peer, comm_, stream_));
  return std::make_unique<NcclRequest>(stream_, device_);
}

void NcclComm::sendrecv(const void* send_data, size_t send_bytes, int dst, void* recv_data,
                        size_t recv_bytes, int src, int tag) {
  const bool send_device = is_device_pointer(send_data), recv_device = is_device_pointer(recv_data);
  DTRAIN_CHECK(send_device == recv_device)
      << "NcclComm::sendrecv: one buffer on the GPU and one on the host";
  if (!send_device)
    return host_->sendrecv(send_data, send_bytes, dst, recv_data, recv_bytes, src, tag);
  enqueue_sendrecv(send_data, send_bytes, dst, recv_data, recv_bytes, src);
  synchronize();
}

void NcclComm::allreduce_sum(const Tensor& buffer) {
  if (buffer.device() != Device::cuda) return host_->allreduce_sum(buffer);
  DTRAIN_CHECK(buffer.dtype() == DType::f32) << "allreduce_sum of a non-f32 tensor";
  enqueue_allreduce_sum(buffer.data<float>(), buffer.numel());
  synchronize();
}

void NcclComm::broadcast(const Tensor& buffer, int root) {
  if (buffer.device() != Device::cuda) return host_->broadcast(buffer, root);
  cuda::set_device(device_);
  if (buffer.bytes() > 0) {
    DTRAIN_NCCL_CHECK(
        ncclBroadcast(buffer.raw(), buffer.raw(), buffer.bytes(), ncclUint8, root, comm_, stream_));
  }
  synchronize();
}

std::unique_ptr<Comm> NcclComm::split(int color, int key) {
  return std::make_unique<NcclComm>(host_->split(color, key), device_);
}

void NcclComm::abort(int exit_code) {
  if (comm_) ncclCommAbort(comm_);  // unblocks kernels waiting for a dead peer
  comm_ = nullptr;
  host_->abort(exit_code);
  std::exit(exit_code);  // not reached: the host abort does not return
}

}  // namespace dtrain
