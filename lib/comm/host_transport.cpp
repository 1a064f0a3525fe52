#include <memory>

#include "comm/gradient_transport.h"
#include "comm/ring_allreduce.h"  // RingAllreduce
#include "compress/codec.h"       // make_codec
#include "core/error.h"

namespace dtrain {
namespace {

// Without a codec it uses MPI_Allreduce, which Open MPI tunes per message size and which
// measured faster than our uncompressed ring here.
class HostTransport final : public GradientTransport {
 public:
  HostTransport(Comm& comm, const std::string& codec, int64_t max_elements)
      : comm_(comm), codec_(make_codec(codec)) {
    if (codec_->name() != "none")
      ring_ = std::make_unique<RingAllreduce>(comm_, *codec_, max_elements);
  }
  std::string describe() const override {
    return ring_ ? "ring all-reduce + " + codec_->name() : "MPI_Allreduce (compression none)";
  }
  double reduce(const Tensor& buffer, const std::shared_ptr<void>&) override {
    DTRAIN_CHECK(buffer.device() == Device::cpu && buffer.dtype() == DType::f32)
        << "host gradient all-reduce of a non-host or non-f32 buffer";
    if (!ring_) {
      comm_.allreduce_sum(buffer);
      return 0;
    }
    return ring_->run(buffer.data<float>(), buffer.numel()).compress_s;
  }

 private:
  Comm& comm_;
  std::unique_ptr<Codec> codec_;
  std::unique_ptr<RingAllreduce> ring_;  // null: MPI_Allreduce
};

}  // namespace

std::unique_ptr<GradientTransport> make_host_transport(Comm& comm, const std::string& codec,
                                                       int64_t max_elements) {
  return std::make_unique<HostTransport>(comm, codec, max_elements);
}

#ifndef DTRAIN_HAVE_CUDA
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
