// Backend::adamw_step on the CPU: one vectorised OpenMP pass of backend/adamw_update.h.
#include <omp.h>  // the loop's threads

#include "backend/adamw_update.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace dtrain {

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
  // Small buffers stay on one thread: waking a team costs more than the loop. (Two loops: the
  // single-thread one vectorises as a plain simd loop, not as an OpenMP region run alone.)
  constexpr int64_t kParallelThreshold = 1 << 16;
  if (n <= kParallelThreshold || threads_ <= 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) adamw::step(i, wp, gp, mp, vp, c);
    return;
  }
  // firstprivate: each thread's own copy of the coefficients, which no store can alias.
#pragma omp parallel for simd num_threads(threads_) firstprivate(c)
  for (int64_t i = 0; i < n; ++i) adamw::step(i, wp, gp, mp, vp, c);
}

}  // namespace dtrain
