// Backend::adamw_step on the CPU: one vectorised OpenMP pass of backend/adamw_update.h.
#include <omp.h>  // the loop's threads

#include "backend/adamw_update.h"
#include "backend/cpu/cpu_backend.h"
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

}  // namespace

void CpuBackend::adamw_step(const Tensor& weights, const Tensor& grads, const Tensor& m,
                            const Tensor& v, const AdamWHyper& h) {
  for (const Tensor* t : {&weights, &grads, &m, &v})
    DTRAIN_CHECK(t->dtype() == DType::f32 && t->device() == Device::cpu)
        << "adamw_step: expected host f32 tensors";
  const int64_t n = weights.numel();
  DTRAIN_CHECK(grads.numel() == n && m.numel() == n && v.numel() == n)
      << "adamw_step: sizes differ, weights " << weights.shape().str() << ", gradients "
      << grads.shape().str() << ", m " << m.shape().str() << ", v " << v.shape().str();
  DTRAIN_CHECK(h.step >= 1) << "adamw_step: the step count starts at 1, got " << h.step;
  float* wp = weights.data<float>();
  const float* gp = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const adamw::Coeffs c = adamw::coeffs(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
  if (adamw::weight_below_half(c))
    run_steps<true>(wp, gp, mp, vp, n, threads_, c);
  else
    run_steps<false>(wp, gp, mp, vp, n, threads_, c);
}

}  // namespace dtrain
