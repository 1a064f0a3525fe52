#include "optim/sgd.h"

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
  backend_.sgd_step(parameters.slice(trainable_offset_, s), gradients.slice(trainable_offset_, s),
                    momentum_part(trainable_offset_, s), hyper(lr));
}

void Sgd::step_range(float lr, const Tensor& parameters, const Tensor& gradients, int64_t offset,
                     int64_t count) {
  const auto [begin, end] = clipped_range(parameters, gradients, offset, count, "Sgd::step_range");
  if (end <= begin) return;
  const Shape s{end - begin};
  backend_.sgd_step(parameters.slice(begin, s), gradients.slice(begin, s), momentum_part(begin, s),
                    hyper(lr));
}

void Sgd::step_range_delta(float lr, const Tensor& parameters, const Tensor& gradients,
                           const Tensor& delta, int64_t offset, int64_t count) {
  DTRAIN_CHECK(delta.numel() == parameters_.numel()) << "Sgd::step_range_delta: another size";
  const auto [begin, end] =
      clipped_range(parameters, gradients, offset, count, "Sgd::step_range_delta");
  if (end <= begin) return;
  const Shape s{end - begin};
  backend_.sgd_step_delta(parameters.slice(begin, s), gradients.slice(begin, s),
                          momentum_part(begin, s), delta.slice(begin, s), hyper(lr));
}

void Sgd::predict_range(float lr, const Tensor& out, const Tensor& parameters,
                        const Tensor& gradients, int64_t offset, int64_t count) const {
  DTRAIN_CHECK(out.numel() == parameters_.numel()) << "Sgd::predict_range into another size";
  const auto [begin, end] =
      clipped_range(parameters, gradients, offset, count, "Sgd::predict_range");
  if (end <= begin) return;
  const Shape s{end - begin};
  backend_.sgd_predict(out.slice(begin, s), parameters.slice(begin, s), gradients.slice(begin, s),
                       momentum_part(begin, s), hyper(lr));
}

void Sgd::step_predict_range(float lr, const Tensor& parameters, const Tensor& gradients,
                             const Tensor& ghat, const Tensor& out, int64_t offset, int64_t count) {
  DTRAIN_CHECK(ghat.numel() == parameters_.numel() && out.numel() == parameters_.numel())
      << "Sgd::step_predict_range: another size";
  const auto [begin, end] =
      clipped_range(parameters, gradients, offset, count, "Sgd::step_predict_range");
  if (end <= begin) return;
  const Shape s{end - begin};
  backend_.sgd_step_predict(parameters.slice(begin, s), gradients.slice(begin, s),
                            momentum_part(begin, s), ghat.slice(begin, s), out.slice(begin, s),
                            hyper(lr));
}

double Sgd::step_range_dot(float lr, const Tensor& parameters, const Tensor& gradients, float alpha,
                           const Tensor& other, const Tensor& scratch, int64_t offset,
                           int64_t count) {
  DTRAIN_CHECK(other.numel() == parameters_.numel() && scratch.numel() == parameters_.numel())
      << "Sgd::step_range_dot: another size";
  const auto [begin, end] =
      clipped_range(parameters, gradients, offset, count, "Sgd::step_range_dot");
  if (end <= begin) return 0;
  const Shape s{end - begin};
  return backend_.sgd_step_dot(parameters.slice(begin, s), gradients.slice(begin, s),
                               momentum_part(begin, s), alpha, other.slice(begin, s),
                               scratch.slice(begin, s), hyper(lr));
}

void Sgd::predict_range_sum(float lr, const Tensor& out, const Tensor& parameters,
                            const GradientSum& ghat, int64_t offset, int64_t count) const {
  DTRAIN_CHECK(out.numel() == parameters_.numel() && ghat.y.numel() == parameters_.numel())
      << "Sgd::predict_range_sum: another size";
  const auto [begin, end] =
      clipped_range(parameters, ghat.x, offset, count, "Sgd::predict_range_sum");
  if (end <= begin) return;
  const Shape s{end - begin};
  backend_.sgd_predict_sum(out.slice(begin, s), parameters.slice(begin, s), ghat.slice(begin, s),
                           momentum_part(begin, s), hyper(lr));
}

}  // namespace dtrain
