// The defaults of the fused optimizer passes (SAPipe's step with its Δ, its gᵀΔ, its prediction
// gradient): the same arithmetic composed of simpler ops, a pass each, for backends without
// kernels of their own (the CUDA backend today). The CPU backend fuses each into one pass.
#include "backend/backend.h"

namespace dtrain {

void Backend::sgd_step_delta(const Tensor& weights, const Tensor& grads, const Tensor& momentum_buf,
                             const Tensor& delta, const SgdHyper& hyper) {
  copy(delta, weights);
  sgd_step(weights, grads, momentum_buf, hyper);
  axpby(1.0f, weights, -1.0f, delta);  // new − old, rounded once
}

double Backend::axpby_dot(float alpha, const Tensor& x, float beta, const Tensor& y,
                          const Tensor& z) {
  axpby(alpha, x, beta, y);
  return dot(y, z);
}

void Backend::scale_copy(const Tensor& dst, const Tensor& src, float alpha) {
  copy(dst, src);
  scale(dst, alpha);
}

double Backend::sgd_step_dot(const Tensor& weights, const Tensor& grads, const Tensor& momentum_buf,
                             float alpha, const Tensor& other, const Tensor& scratch,
                             const SgdHyper& hyper) {
  sgd_step_delta(weights, grads, momentum_buf, scratch, hyper);
  return axpby_dot(alpha, other, 1.0f, grads, scratch);
}

void Backend::sgd_predict_sum(const Tensor& out, const Tensor& weights, const GradientSum& ghat,
                              const Tensor& momentum_buf, const SgdHyper& hyper) {
  axpby(ghat.alpha, ghat.x, ghat.beta, ghat.y);
  sgd_predict(out, weights, ghat.y, momentum_buf, hyper);
}

double Backend::adamw_step_dot(const Tensor& weights, const Tensor& grads, const Tensor& m,
                               const Tensor& v, float alpha, const Tensor& other,
                               const Tensor& scratch, const AdamWHyper& hyper) {
  copy(scratch, weights);
  adamw_step(weights, grads, m, v, hyper);
  axpby(1.0f, weights, -1.0f, scratch);  // Δ = new − old, rounded once
  return axpby_dot(alpha, other, 1.0f, grads, scratch);
}

void Backend::adamw_predict_sum(const Tensor& out, const Tensor& weights, const GradientSum& ghat,
                                const Tensor& m, const Tensor& v, const AdamWHyper& hyper) {
  axpby(ghat.alpha, ghat.x, ghat.beta, ghat.y);
  adamw_predict(out, weights, ghat.y, m, v, hyper);
}

}  // namespace dtrain
