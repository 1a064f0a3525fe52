#include "comm/gradient_allreducer.h"

#include "core/error.h"

namespace dtrain {

GradientAllreducer::GradientAllreducer(Comm& comm, const std::string& codec, int64_t max_elements)
    : comm_(comm.split(0, comm.rank())), codec_(make_codec(codec)) {
  if (codec_->name() != "none")
    ring_ = std::make_unique<RingAllreduce>(*comm_, *codec_, max_elements);
}

std::future<void> GradientAllreducer::start(const Tensor& buffer) {
  DTRAIN_CHECK(buffer.device() == Device::cpu && buffer.dtype() == DType::f32)
      << "gradient all-reduce needs a host f32 buffer";
  return thread_.submit([this, buffer] {
    if (!ring_) return comm_->allreduce_sum(buffer);
    const AllreduceTimes t = ring_->run(buffer.data<float>(), buffer.numel());
    std::lock_guard lock(mutex_);
    compress_s_ += t.compress_s;
  });
}

std::string GradientAllreducer::describe() const {
  return ring_ ? "ring all-reduce + " + codec_->name() : "MPI_Allreduce (compression none)";
}

void GradientAllreducer::take_times(double* comm_s, double* compress_s) {
  const double busy = thread_.take_busy_seconds();
  std::lock_guard lock(mutex_);
  *compress_s = compress_s_;
  *comm_s = busy - compress_s_;
  compress_s_ = 0;
}

}  // namespace dtrain
