// The CUDA gradient transports (gradient_transport.h): NCCL on the GPU buffers, or host staging
// through pinned memory for MPI (ranks sharing a GPU, link emulation, cluster.comm: mpi).
#include <cuda_runtime_api.h>
#include <unistd.h>  // gethostname

#include <functional>  // hash
#include <string>
#include <vector>

#include "backend/backend.h"              // Backend: native stream, device
#include "backend/cuda/cuda_allocator.h"  // pinned_allocator
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"      // set_device
#include "comm/cuda/nccl_comm.h"            // NcclComm
#include "comm/cuda/nccl_ring_allreduce.h"  // NcclRingAllreduce
#include "comm/cuda/plugin_entry.h"         // gpu_identity
#include "comm/gradient_transport.h"
#include "compress/cuda/device_codec.h"  // make_device_codec
#include "core/error.h"

namespace dtrain {
namespace {

// An event recorded on the compute stream after the work producing a gradient buffer.
std::shared_ptr<void> record_ready(Backend& backend) {
  cudaEvent_t event = nullptr;
  DTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  DTRAIN_CUDA_CHECK(cudaEventRecord(event, static_cast<cudaStream_t>(backend.native_stream())));
  return std::shared_ptr<void>(event,
                               [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
}

void wait_ready(cudaStream_t stream, const std::shared_ptr<void>& ready) {
  if (ready) {
    DTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(ready.get()), 0));
  }
}

// Device → pinned host → the host transport (MPI or the host ring) → device, on a stream of
// the comm thread's own: the compute stream never waits for the host.
class StagingTransport final : public GradientTransport {
 public:
  StagingTransport(Comm& comm, Backend& backend, const std::string& codec, int64_t max_elements)
      : backend_(backend),
        device_(backend.device_index()),
        host_(make_host_transport(comm, codec, max_elements)) {
    cuda::set_device(device_);
    staging_ = Tensor::empty({max_elements}, DType::f32, cuda::pinned_allocator());
    DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~StagingTransport() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  std::string describe() const override {
    return host_->describe() + " through pinned host memory";
  }
  std::shared_ptr<void> mark_ready(const Tensor&) override { return record_ready(backend_); }
  double reduce(const Tensor& buffer, const std::shared_ptr<void>& ready) override {
    return staged(buffer, ready, [&](const Tensor& host) { return host_->reduce(host, nullptr); });
  }
  double reduce_scatter(const Tensor& buffer, const std::shared_ptr<void>& ready) override {
    return staged(buffer, ready,
                  [&](const Tensor& host) { return host_->reduce_scatter(host, nullptr); });
  }
  double all_gather(const Tensor& buffer, const std::shared_ptr<void>& ready) override {
    return staged(buffer, ready,
                  [&](const Tensor& host) { return host_->all_gather(host, nullptr); });
  }

 private:
  // `buffer` to pinned memory, `collective` there, and back.
  template <class Collective>
  double staged(const Tensor& buffer, const std::shared_ptr<void>& ready, Collective collective) {
    DTRAIN_CHECK(buffer.numel() <= staging_.numel())
        << "gradient collective of " << buffer.numel() << " > " << staging_.numel();
    cuda::set_device(device_);
    const Tensor host = staging_.slice(0, buffer.shape());
    wait_ready(stream_, ready);
    DTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(host.raw(), buffer.raw(), buffer.bytes(), cudaMemcpyDeviceToHost, stream_));
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const double codec_s = collective(host);
    DTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(buffer.raw(), host.raw(), buffer.bytes(), cudaMemcpyHostToDevice, stream_));
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return codec_s;
  }

  Backend& backend_;
  int device_;
  std::unique_ptr<GradientTransport> host_;
  Tensor staging_;
  cudaStream_t stream_ = nullptr;
};

// NCCL on the device buffers: ncclAllReduce without compression, the ring with GPU codec
// kernels over NCCL send/receive otherwise.
class NcclTransport final : public GradientTransport {
 public:
  NcclTransport(Comm& comm, Backend& backend, const std::string& codec, int64_t max_elements)
      : backend_(backend), codec_(make_device_codec(codec)) {
    nccl_ = std::make_unique<NcclComm>(comm.split(0, comm.rank()), backend.device_index());
    if (codec_->name() != "none")
      ring_ = std::make_unique<NcclRingAllreduce>(*nccl_, *codec_, max_elements);
  }
  std::string describe() const override {
    return (ring_ ? "ring all-reduce + " + codec_->name() + " over " : "all-reduce of ") +
           nccl_->name();
  }
  std::shared_ptr<void> mark_ready(const Tensor&) override { return record_ready(backend_); }
  double reduce(const Tensor& buffer, const std::shared_ptr<void>& ready) override {
    DTRAIN_CHECK(buffer.device() == Device::cuda) << "NCCL all-reduce of a host buffer";
    cuda::set_device(nccl_->device());
    wait_ready(nccl_->stream(), ready);
    if (ring_)
      ring_->enqueue(buffer.data<float>(), buffer.numel());
    else
      nccl_->enqueue_allreduce_sum(buffer.data<float>(), buffer.numel());
    nccl_->synchronize();
    return ring_ ? ring_->last_codec_seconds() : 0.0;
  }
  double reduce_scatter(const Tensor& buffer, const std::shared_ptr<void>& ready) override {
    DTRAIN_CHECK(buffer.device() == Device::cuda) << "NCCL reduce-scatter of a host buffer";
    cuda::set_device(nccl_->device());
    wait_ready(nccl_->stream(), ready);
    if (ring_)
      ring_->enqueue_reduce_scatter(buffer.data<float>(), buffer.numel());
    else
      nccl_->enqueue_reduce_scatter_blocks(buffer.data<float>(), buffer.numel());
    nccl_->synchronize();
    return ring_ ? ring_->last_codec_seconds() : 0.0;
  }
  double all_gather(const Tensor& buffer, const std::shared_ptr<void>& ready) override {
    DTRAIN_CHECK(buffer.device() == Device::cuda) << "NCCL all-gather of a host buffer";
    cuda::set_device(nccl_->device());
    wait_ready(nccl_->stream(), ready);
    nccl_->enqueue_all_gather_blocks(buffer.data<float>(), buffer.numel());
    nccl_->synchronize();
    return 0.0;
  }

 private:
  Backend& backend_;
  std::unique_ptr<DeviceCodec> codec_;
  std::unique_ptr<NcclComm> nccl_;
  std::unique_ptr<NcclRingAllreduce> ring_;
};

}  // namespace

// This rank's GPU, as a number that differs between any two GPUs of a cluster: a hash of the
// host name and the PCI bus id, cut to 52 bits so that it survives a double (Comm::gather).
double gpu_identity(int device) {
  char bus[64] = {};
  DTRAIN_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const uint64_t hash = std::hash<std::string>{}(std::string(host) + "/" + bus);
  return static_cast<double>(hash & ((uint64_t{1} << 52) - 1));
}

std::unique_ptr<GradientTransport> make_device_transport(Comm& comm, Backend& backend,
                                                         const std::string& codec,
                                                         int64_t max_elements, bool use_nccl) {
  DTRAIN_CHECK(backend.device() == Device::cuda) << "device gradients on a non-CUDA backend";
  if (use_nccl) return std::make_unique<NcclTransport>(comm, backend, codec, max_elements);
  return std::make_unique<StagingTransport>(comm, backend, codec, max_elements);
}

}  // namespace dtrain
