#include "optim/sgd.h"

#include <algorithm>  // max, min

#include "core/error.h"

namespace dtrain {

Sgd::Sgd(Backend& backend, Tensor parameters, Tensor gradients, const SgdOptions& options,
         int64_t trainable_offset)
    : Optimizer(std::move(parameters), std::move(gradients), trainable_offset),
      backend_(backend),
      options_(options) {
  DTRAIN_CHECK(!options_.nesterov || (options_.momentum > 0 && options_.dampening == 0))
      << "Nesterov momentum needs momentum > 0 and dampening = 0";
  if (options_.momentum != 0.0f) momentum_ = backend_.zeros(parameters_.shape());
}

std::vector<std::pair<std::string, Tensor>> Sgd::state_buffers() const {
  if (!momentum_.defined()) return {};
  return {{"momentum", momentum_}};
}

void Sgd::step(float lr, const Tensor& parameters, const Tensor& gradients) {
  DTRAIN_CHECK(parameters.numel() == parameters_.numel() &&
               gradients.numel() == parameters_.numel())
      << "Sgd::step with buffers of another size";
  const int64_t n = parameters_.numel() - trainable_offset_;
  if (n == 0) return;
  const Shape s{n};
  const Tensor v = momentum_.defined() ? momentum_.slice(trainable_offset_, s) : Tensor();
  backend_.sgd_step(parameters.slice(trainable_offset_, s), gradients.slice(trainable_offset_, s),
                    v, hyper(lr));
}

void Sgd::step_range(float lr, const Tensor& parameters, const Tensor& gradients, int64_t offset,
                     int64_t count) {
  DTRAIN_CHECK(parameters.numel() == parameters_.numel() &&
               gradients.numel() == parameters_.numel())
      << "Sgd::step_range with buffers of another size";
  const int64_t begin = std::max(offset, trainable_offset_);
  const int64_t end = std::min(offset + count, parameters_.numel());
  if (end <= begin) return;
  const Shape s{end - begin};
  const Tensor v = momentum_.defined() ? momentum_.slice(begin, s) : Tensor();
  backend_.sgd_step(parameters.slice(begin, s), gradients.slice(begin, s), v, hyper(lr));
}

void Sgd::step_range_delta(float lr, const Tensor& parameters, const Tensor& gradients,
                           const Tensor& delta, int64_t offset, int64_t count) {
  DTRAIN_CHECK(parameters.numel() == parameters_.numel() &&
               gradients.numel() == parameters_.numel() && delta.numel() == parameters_.numel())
      << "Sgd::step_range_delta with buffers of another size";
  const int64_t begin = std::max(offset, trainable_offset_);
  const int64_t end = std::min(offset + count, parameters_.numel());
  if (end <= begin) return;
  const Shape s{end - begin};
  const Tensor v = momentum_.defined() ? momentum_.slice(begin, s) : Tensor();
  backend_.sgd_step_delta(parameters.slice(begin, s), gradients.slice(begin, s), v,
                          delta.slice(begin, s), hyper(lr));
}

void Sgd::predict_range(float lr, const Tensor& out, const Tensor& parameters,
                        const Tensor& gradients, int64_t offset, int64_t count) const {
  DTRAIN_CHECK(out.numel() == parameters_.numel() && parameters.numel() == parameters_.numel() &&
               gradients.numel() == parameters_.numel())
      << "Sgd::predict_range with buffers of another size";
  const int64_t begin = std::max(offset, trainable_offset_);
  const int64_t end = std::min(offset + count, parameters_.numel());
  if (end <= begin) return;
  const Shape s{end - begin};
  const Tensor v = momentum_.defined() ? momentum_.slice(begin, s) : Tensor();
  backend_.sgd_predict(out.slice(begin, s), parameters.slice(begin, s), gradients.slice(begin, s),
                       v, hyper(lr));
}

}  // namespace dtrain

namespace dtrain {

void Sgd::step_predict_range(float lr, const Tensor& parameters, const Tensor& gradients,
                             const Tensor& ghat, const Tensor& out, int64_t offset, int64_t count) {
  const int64_t size = parameters_.numel();
  DTRAIN_CHECK(parameters.numel() == size && gradients.numel() == size && ghat.numel() == size &&
               out.numel() == size)
      << "Sgd::step_predict_range with buffers of another size";
  const int64_t begin = std::max(offset, trainable_offset_);
  const int64_t end = std::min(offset + count, size);
  if (end <= begin) return;
  const Shape s{end - begin};
  const Tensor v = momentum_.defined() ? momentum_.slice(begin, s) : Tensor();
  backend_.sgd_step_predict(parameters.slice(begin, s), gradients.slice(begin, s), v,
                            ghat.slice(begin, s), out.slice(begin, s), hyper(lr));
}

double Sgd::step_range_dot(float lr, const Tensor& parameters, const Tensor& gradients, float alpha,
                           const Tensor& other, const Tensor& scratch, int64_t offset,
                           int64_t count) {
  const int64_t size = parameters_.numel();
  DTRAIN_CHECK(parameters.numel() == size && gradients.numel() == size && other.numel() == size &&
               scratch.numel() == size)
      << "Sgd::step_range_dot with buffers of another size";
  const int64_t begin = std::max(offset, trainable_offset_);
  const int64_t end = std::min(offset + count, size);
  if (end <= begin) return 0;
  const Shape s{end - begin};
  const Tensor v = momentum_.defined() ? momentum_.slice(begin, s) : Tensor();
  return backend_.sgd_step_dot(parameters.slice(begin, s), gradients.slice(begin, s), v, alpha,
                               other.slice(begin, s), scratch.slice(begin, s), hyper(lr));
}

void Sgd::predict_range_sum(float lr, const Tensor& out, const Tensor& parameters,
                            const GradientSum& ghat, int64_t offset, int64_t count) const {
  const int64_t size = parameters_.numel();
  DTRAIN_CHECK(out.numel() == size && parameters.numel() == size && ghat.x.numel() == size &&
               ghat.y.numel() == size)
      << "Sgd::predict_range_sum with buffers of another size";
  const int64_t begin = std::max(offset, trainable_offset_);
  const int64_t end = std::min(offset + count, size);
  if (end <= begin) return;
  const Shape s{end - begin};
  const Tensor v = momentum_.defined() ? momentum_.slice(begin, s) : Tensor();
  backend_.sgd_predict_sum(out.slice(begin, s), parameters.slice(begin, s), ghat.slice(begin, s), v,
                           hyper(lr));
}

}  // namespace dtrain
