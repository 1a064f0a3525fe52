// Backend::adamw_step (and SAPipe's adamw_predict, adamw_step_predict) on the CPU: one
// vectorised OpenMP pass of backend/adamw_update.h each.
#include <omp.h>  // the loop's threads

#include <initializer_list>
#include <type_traits>  // bool_constant: the lerp form

#include "backend/adamw_update.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/lane_ordered_sum.h"
#include "core/error.h"

namespace dtrain {
namespace {

// The element loop with the lerp form fixed and the coefficients a local copy (by value: no
// store through w, m or v can alias them, so they stay in registers), so that it vectorises —
// 16 elements an AVX-512 instruction, where the loop over a referenced Coeffs with the form
// chosen per element stayed scalar.
template <bool kWeightBelowHalf>
void run_steps(float* wp, const float* gp, float* mp, float* vp, int64_t n, int threads,
               const adamw::Coeffs c) {
  // Small buffers stay on one thread: waking a team costs more than the loop. (Two loops: the
  // single-thread one vectorises as a plain simd loop, not as an OpenMP region run alone.)
  constexpr int64_t kParallelThreshold = 1 << 16;
  if (n <= kParallelThreshold || threads <= 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) adamw::step<kWeightBelowHalf>(i, wp, gp, mp, vp, c);
    return;
  }
  // firstprivate: each thread's own copy of the coefficients, which no store can alias.
#pragma omp parallel for simd num_threads(threads) firstprivate(c)
  for (int64_t i = 0; i < n; ++i) adamw::step<kWeightBelowHalf>(i, wp, gp, mp, vp, c);
}

// SAPipe's prediction loops (adamw_predict, adamw_step_predict, adamw_predict_sum), run_steps'
// pattern written out: their floats as separate by-value parameters. Captured in a loop body's
// closure they could be aliased by its stores to out, w, m or v, so the compiler reloaded them
// every element and the loops ran scalar (adamw_predict 2.1 ms where adamw_step takes 0.45 ms on
// 647k floats; bundled into one struct parameter, step_predict still took 4.4 ms).
template <bool kWeightBelowHalf>
void run_predicts(float* op, const float* wp, const float* gp, const float* mp, const float* vp,
                  int64_t n, int threads, const adamw::Coeffs c) {
  constexpr int64_t kParallelThreshold = 1 << 16;
  if (n <= kParallelThreshold || threads <= 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) adamw::predict<kWeightBelowHalf>(i, op, wp, gp, mp, vp, c);
    return;
  }
#pragma omp parallel for simd num_threads(threads) firstprivate(c)
  for (int64_t i = 0; i < n; ++i) adamw::predict<kWeightBelowHalf>(i, op, wp, gp, mp, vp, c);
}

template <bool kWeightBelowHalf>
void run_step_predicts(float* wp, const float* gp, float* mp, float* vp, const float* hp, float* op,
                       int64_t n, int threads, const adamw::Coeffs c, const adamw::Coeffs next) {
  constexpr int64_t kParallelThreshold = 1 << 16;
  if (n <= kParallelThreshold || threads <= 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      adamw::step_predict<kWeightBelowHalf>(i, wp, gp, mp, vp, hp, op, c, next);
    return;
  }
#pragma omp parallel for simd num_threads(threads) firstprivate(c, next)
  for (int64_t i = 0; i < n; ++i)
    adamw::step_predict<kWeightBelowHalf>(i, wp, gp, mp, vp, hp, op, c, next);
}

template <bool kWeightBelowHalf>
void run_predict_sums(float* op, const float* wp, const float alpha, const float* xp,
                      const float beta, const float* yp, const float* mp, const float* vp,
                      int64_t n, int threads, const adamw::Coeffs c) {
  constexpr int64_t kParallelThreshold = 1 << 16;
  if (n <= kParallelThreshold || threads <= 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      adamw::predict_sum<kWeightBelowHalf>(i, op, wp, alpha, xp, beta, yp, mp, vp, c);
    return;
  }
#pragma omp parallel for simd num_threads(threads) firstprivate(c, alpha, beta)
  for (int64_t i = 0; i < n; ++i)
    adamw::predict_sum<kWeightBelowHalf>(i, op, wp, alpha, xp, beta, yp, mp, vp, c);
}

// Calls run(std::bool_constant<weight_below_half(c)>{}): the lerp form fixed per loop.
template <class Run>
void with_lerp_form(const adamw::Coeffs& c, Run&& run) {
  if (adamw::weight_below_half(c)) return run(std::true_type{});
  return run(std::false_type{});
}

void check_buffers(std::initializer_list<const Tensor*> tensors, const char* what) {
  const int64_t n = (*tensors.begin())->numel();
  for (const Tensor* t : tensors) {
    DTRAIN_CHECK(t->dtype() == DType::f32 && t->device() == Device::cpu)
        << what << ": expected host f32 tensors";
    DTRAIN_CHECK(t->numel() == n) << what << ": sizes differ, " << t->shape().str() << " and "
                                  << (*tensors.begin())->shape().str();
  }
}

adamw::Coeffs coeffs_at(const AdamWHyper& h, int64_t step, const char* what) {
  DTRAIN_CHECK(step >= 1) << what << ": the step count starts at 1, got " << step;
  return adamw::coeffs(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, step);
}

}  // namespace

void CpuBackend::adamw_step(const Tensor& weights, const Tensor& grads, const Tensor& m,
                            const Tensor& v, const AdamWHyper& h) {
  check_buffers({&weights, &grads, &m, &v}, "adamw_step");
  float* wp = weights.data<float>();
  const float* gp = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const adamw::Coeffs c = coeffs_at(h, h.step, "adamw_step");
  if (adamw::weight_below_half(c))
    run_steps<true>(wp, gp, mp, vp, weights.numel(), threads_, c);
  else
    run_steps<false>(wp, gp, mp, vp, weights.numel(), threads_, c);
}

void CpuBackend::adamw_predict(const Tensor& out, const Tensor& weights, const Tensor& grads,
                               const Tensor& m, const Tensor& v, const AdamWHyper& h) {
  check_buffers({&weights, &grads, &m, &v, &out}, "adamw_predict");
  float* op = out.data<float>();
  const float* wp = weights.data<float>();
  const float* gp = grads.data<float>();
  const float* mp = m.data<float>();
  const float* vp = v.data<float>();
  const adamw::Coeffs c = coeffs_at(h, h.step, "adamw_predict");
  if (adamw::weight_below_half(c))
    run_predicts<true>(op, wp, gp, mp, vp, weights.numel(), threads_, c);
  else
    run_predicts<false>(op, wp, gp, mp, vp, weights.numel(), threads_, c);
}

void CpuBackend::adamw_step_predict(const Tensor& weights, const Tensor& grads, const Tensor& m,
                                    const Tensor& v, const Tensor& ghat, const Tensor& out,
                                    const AdamWHyper& h) {
  check_buffers({&weights, &grads, &m, &v, &ghat, &out}, "adamw_step_predict");
  float* wp = weights.data<float>();
  const float* gp = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const float* hp = ghat.data<float>();
  float* op = out.data<float>();
  const adamw::Coeffs c = coeffs_at(h, h.step, "adamw_step_predict");
  const adamw::Coeffs next = coeffs_at(h, h.step + 1, "adamw_step_predict");
  if (adamw::weight_below_half(c))
    run_step_predicts<true>(wp, gp, mp, vp, hp, op, weights.numel(), threads_, c, next);
  else
    run_step_predicts<false>(wp, gp, mp, vp, hp, op, weights.numel(), threads_, c, next);
}

double CpuBackend::adamw_step_dot(const Tensor& weights, const Tensor& grads, const Tensor& m,
                                  const Tensor& v, float alpha, const Tensor& other,
                                  const Tensor& /*scratch: Δ is never written*/,
                                  const AdamWHyper& h) {
  check_buffers({&weights, &grads, &m, &v, &other}, "adamw_step_dot");
  float* wp = weights.data<float>();
  float* gp = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const float* op = other.data<float>();
  const adamw::Coeffs c = coeffs_at(h, h.step, "adamw_step_dot");
  double sum = 0;
  with_lerp_form(c, [&](auto below_half) {
    constexpr bool kBelowHalf = decltype(below_half)::value;
    sum = cpu::produced_dot(weights.numel(), gp, [=](int64_t b, int64_t count, float* delta) {
      float *wb = wp + b, *gb = gp + b, *mb = mp + b, *vb = vp + b;
      const float* ob = op + b;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        adamw::step_delta<kBelowHalf>(i, wb, gb, mb, vb, delta, c);
        gb[i] = alpha * ob[i] + gb[i];  // axpby's expression with β = 1
      }
    });
  });
  return sum;
}

void CpuBackend::adamw_predict_sum(const Tensor& out, const Tensor& weights,
                                   const GradientSum& ghat, const Tensor& m, const Tensor& v,
                                   const AdamWHyper& h) {
  check_buffers({&weights, &ghat.x, &ghat.y, &m, &v, &out}, "adamw_predict_sum");
  float* op = out.data<float>();
  const float* wp = weights.data<float>();
  const float* xp = ghat.x.data<float>();
  const float* yp = ghat.y.data<float>();
  const float alpha = ghat.alpha, beta = ghat.beta;
  const float* mp = m.data<float>();
  const float* vp = v.data<float>();
  const adamw::Coeffs c = coeffs_at(h, h.step, "adamw_predict_sum");
  if (adamw::weight_below_half(c))
    run_predict_sums<true>(op, wp, alpha, xp, beta, yp, mp, vp, weights.numel(), threads_, c);
  else
    run_predict_sums<false>(op, wp, alpha, xp, beta, yp, mp, vp, weights.numel(), threads_, c);
}

}  // namespace dtrain
