#include "comm/gradient_allreducer.h"

#include "backend/backend.h"  // Backend: where the buffers live
#include "core/error.h"

namespace dtrain {

GradientAllreducer::GradientAllreducer(Comm& comm, const std::string& codec, int64_t max_elements,
                                       const GradientPlacement& placement)
    : comm_(comm.split(0, comm.rank())) {
  const bool on_device = placement.backend && placement.backend->device() != Device::cpu;
  // Every rank votes, host ranks too (`auto` may leave a rank without a usable GPU).
  const bool nccl =
      nccl_usable_everywhere(*comm_, on_device ? placement.backend : nullptr, placement.transport);
  if (on_device)
    transport_ = make_device_transport(*comm_, *placement.backend, codec, max_elements, nccl);
  else
    transport_ = make_host_transport(*comm_, codec, max_elements);
}

// The comm thread stops (running what is queued) before the transport and comm it uses go.
GradientAllreducer::~GradientAllreducer() = default;

std::future<void> GradientAllreducer::start(const Tensor& buffer) {
  return submit(&GradientTransport::reduce, buffer);
}

std::future<void> GradientAllreducer::start_reduce_scatter(const Tensor& buffer,
                                                           std::function<void()> after) {
  return submit(&GradientTransport::reduce_scatter, buffer, std::move(after));
}

std::future<void> GradientAllreducer::start_all_gather(const Tensor& buffer) {
  return submit(&GradientTransport::all_gather, buffer);
}

std::future<void> GradientAllreducer::submit(Collective collective, const Tensor& buffer,
                                             std::function<void()> after) {
  DTRAIN_CHECK(buffer.dtype() == DType::f32) << "gradient collective of a non-f32 buffer";
  std::shared_ptr<void> ready = transport_->mark_ready(buffer);
  return thread_.submit(
      [this, collective, buffer, ready = std::move(ready), after = std::move(after)] {
        const double codec_s = (transport_.get()->*collective)(buffer, ready);
        if (after) after();
        std::lock_guard lock(mutex_);
        compress_s_ += codec_s;
      });
}

std::future<void> GradientAllreducer::then(std::function<void(Comm&)> task) {
  return thread_.submit([this, task = std::move(task)] { task(*comm_); });
}

std::string GradientAllreducer::describe() const {
  return transport_->describe();
}

void GradientAllreducer::take_times(double* comm_s, double* compress_s) {
  const double busy = thread_.take_busy_seconds();
  std::lock_guard lock(mutex_);
  *compress_s = compress_s_;
  *comm_s = busy - compress_s_;
  compress_s_ = 0;
}

}  // namespace dtrain
