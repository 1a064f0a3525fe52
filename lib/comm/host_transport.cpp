#include <memory>

#include "comm/gradient_transport.h"
#include "comm/ring_allreduce.h"  // RingAllreduce
#include "compress/codec.h"       // make_codec
#include "core/error.h"

#ifdef DTRAIN_HAVE_CUDA
#include <set>  // the GPUs seen in the NCCL vote
#include <vector>

#include "backend/backend.h"         // Backend: where a rank's gradients live
#include "backend/cuda_plugin.h"     // cuda_plugin_symbol
#include "comm/cuda/plugin_entry.h"  // CudaCommEntry: the plugin's transports
#endif

namespace dtrain {
namespace {

// Without a codec the all-reduce is MPI_Allreduce, which Open MPI tunes per message size. The
// halves of sharded training go over dtrain's ring, whose blocks and order of sums are known: a
// sharded step then equals the ring's all-reduce bit for bit.
class HostTransport final : public GradientTransport {
 public:
  HostTransport(Comm& comm, const std::string& codec, int64_t max_elements)
      : comm_(comm), codec_(make_codec(codec)), max_elements_(max_elements) {
    if (codec_->name() != "none")
      ring_ = std::make_unique<RingAllreduce>(comm_, *codec_, max_elements);
  }
  std::string describe() const override {
    return codec_->name() != "none" ? "ring all-reduce + " + codec_->name()
                                    : "MPI_Allreduce (compression none)";
  }
  double reduce(const Tensor& buffer, const std::shared_ptr<void>&) override {
    DTRAIN_CHECK(buffer.device() == Device::cpu && buffer.dtype() == DType::f32)
        << "host gradient all-reduce of a non-host or non-f32 buffer";
    if (codec_->name() == "none") {
      comm_.allreduce_sum(buffer);
      return 0;
    }
    return ring_->run(buffer.data<float>(), buffer.numel()).compress_s;
  }
  double reduce_scatter(const Tensor& buffer, const std::shared_ptr<void>&) override {
    check_host(buffer);
    return shard_ring().reduce_scatter(buffer.data<float>(), buffer.numel()).compress_s;
  }
  double all_gather(const Tensor& buffer, const std::shared_ptr<void>&) override {
    check_host(buffer);
    return shard_ring().all_gather(buffer.data<float>(), buffer.numel()).compress_s;
  }

 private:
  static void check_host(const Tensor& buffer) {
    DTRAIN_CHECK(buffer.device() == Device::cpu && buffer.dtype() == DType::f32)
        << "host gradient collective of a non-host or non-f32 buffer";
  }
  // The ring of the halves: the all-reduce's own where it has one, else one made at first use
  // (a run that never shards keeps no ring scratch).
  RingAllreduce& shard_ring() {
    if (!ring_) ring_ = std::make_unique<RingAllreduce>(comm_, *codec_, max_elements_);
    return *ring_;
  }

  Comm& comm_;
  std::unique_ptr<Codec> codec_;
  int64_t max_elements_;
  std::unique_ptr<RingAllreduce> ring_;  // null: MPI_Allreduce (until the halves need one)
};

}  // namespace

std::unique_ptr<GradientTransport> make_host_transport(Comm& comm, const std::string& codec,
                                                       int64_t max_elements) {
  return std::make_unique<HostTransport>(comm, codec, max_elements);
}

#ifdef DTRAIN_HAVE_CUDA
namespace {

// The GPU transports live in the CUDA plugin (backend/cuda_plugin.h), loaded by then: a GPU
// backend came from it.
const CudaCommEntry& cuda_comm_entry() {
  using EntryFunction = const CudaCommEntry* (*)();
  std::string why;
  const auto entry =
      reinterpret_cast<EntryFunction>(cuda_plugin_symbol("dtrain_cuda_comm_entry", &why));
  DTRAIN_CHECK(entry) << "gradient buffers on a GPU, but " << why;
  return *entry();
}

}  // namespace

bool nccl_usable_everywhere(Comm& comm, Backend* backend, const std::string& choice) {
  // Row: {has a GPU, its identity, link emulated}; rank 0 decides, everyone learns the answer.
  // Only a rank with a GPU asks the plugin (which its backend has loaded) who its GPU is.
  const bool gpu = backend && backend->device() == Device::cuda;
  const std::vector<double> row{gpu ? 1.0 : 0.0,
                                gpu ? cuda_comm_entry().gpu_identity(backend->device_index()) : 0.0,
                                comm.emulates_link() ? 1.0 : 0.0};
  const std::vector<std::vector<double>> rows = comm.gather(row, 0);
  std::string verdict;  // empty: NCCL can work
  if (comm.rank() == 0) {
    std::set<double> seen;
    for (size_t r = 0; r < rows.size() && verdict.empty(); ++r) {
      if (rows[r][0] == 0)
        verdict = "rank " + std::to_string(r) + " has no GPU";
      else if (!seen.insert(rows[r][1]).second)
        verdict = "ranks share a GPU (NCCL needs one GPU per rank)";
      else if (rows[r][2] != 0)
        verdict = "cluster.link is emulated and NCCL would bypass the pacing";
    }
  }
  comm.broadcast(verdict, 0);
  DTRAIN_INPUT_CHECK(choice != "nccl" || verdict.empty())
      << "cluster.comm: nccl, but " << verdict << "; use cluster.comm: auto or mpi";
  return choice != "mpi" && verdict.empty();
}

std::unique_ptr<GradientTransport> make_device_transport(Comm& comm, Backend& backend,
                                                         const std::string& codec,
                                                         int64_t max_elements, bool use_nccl) {
  return cuda_comm_entry().make_device_transport(comm, backend, codec, max_elements, use_nccl);
}
#else
bool nccl_usable_everywhere(Comm& comm, Backend*, const std::string& choice) {
  DTRAIN_INPUT_CHECK(choice != "nccl")
      << "cluster.comm: nccl, but this dtrain was built without CUDA (use auto or mpi)";
  return false;
}
std::unique_ptr<GradientTransport> make_device_transport(Comm&, Backend&, const std::string&,
                                                         int64_t, bool) {
  throw Error("gradient buffers on a GPU, but this dtrain was built without CUDA");
}
#endif

}  // namespace dtrain
