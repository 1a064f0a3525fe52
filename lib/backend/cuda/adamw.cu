// Backend::adamw_step on the GPU: a grid-stride kernel over the element arithmetic of
// backend/adamw_update.h, shared with the CPU loop (compiled without FMA contraction, as the
// other element-wise kernels).
#include "backend/adamw_update.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace dtrain::cuda {
namespace {

template <bool kWeightBelowHalf>
__global__ void adamw_step_kernel(float* w, const float* g, float* m, float* v, int64_t n,
                                  adamw::Coeffs c) {
  DTRAIN_GRID_STRIDE(i, n) adamw::step<kWeightBelowHalf>(i, w, g, m, v, c);
}

template <bool kWeightBelowHalf>
__global__ void adamw_predict_kernel(float* out, const float* w, const float* g, const float* m,
                                     const float* v, int64_t n, adamw::Coeffs c) {
  DTRAIN_GRID_STRIDE(i, n) adamw::predict<kWeightBelowHalf>(i, out, w, g, m, v, c);
}

template <bool kWeightBelowHalf>
__global__ void adamw_step_predict_kernel(float* w, const float* g, float* m, float* v,
                                          const float* ghat, float* out, int64_t n, adamw::Coeffs c,
                                          adamw::Coeffs next) {
  DTRAIN_GRID_STRIDE(i, n)
  adamw::step_predict<kWeightBelowHalf>(i, w, g, m, v, ghat, out, c, next);
}

}  // namespace

void adamw_step_f32(float* w, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, int64_t step, cudaStream_t stream) {
  if (n <= 0) return;
  const adamw::Coeffs c = adamw::coeffs(lr, beta1, beta2, eps, weight_decay, step);
  if (adamw::weight_below_half(c))
    adamw_step_kernel<true><<<grid_for(n), kThreads, 0, stream>>>(w, g, m, v, n, c);
  else
    adamw_step_kernel<false><<<grid_for(n), kThreads, 0, stream>>>(w, g, m, v, n, c);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void adamw_predict_f32(float* out, const float* w, const float* g, const float* m, const float* v,
                       int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                       int64_t step, cudaStream_t stream) {
  if (n <= 0) return;
  const adamw::Coeffs c = adamw::coeffs(lr, beta1, beta2, eps, weight_decay, step);
  if (adamw::weight_below_half(c))
    adamw_predict_kernel<true><<<grid_for(n), kThreads, 0, stream>>>(out, w, g, m, v, n, c);
  else
    adamw_predict_kernel<false><<<grid_for(n), kThreads, 0, stream>>>(out, w, g, m, v, n, c);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void adamw_step_predict_f32(float* w, const float* g, float* m, float* v, const float* ghat,
                            float* out, int64_t n, float lr, float beta1, float beta2, float eps,
                            float weight_decay, int64_t step, cudaStream_t stream) {
  if (n <= 0) return;
  const adamw::Coeffs c = adamw::coeffs(lr, beta1, beta2, eps, weight_decay, step);
  const adamw::Coeffs next = adamw::coeffs(lr, beta1, beta2, eps, weight_decay, step + 1);
  if (adamw::weight_below_half(c))
    adamw_step_predict_kernel<true>
        <<<grid_for(n), kThreads, 0, stream>>>(w, g, m, v, ghat, out, n, c, next);
  else
    adamw_step_predict_kernel<false>
        <<<grid_for(n), kThreads, 0, stream>>>(w, g, m, v, ghat, out, n, c, next);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace dtrain::cuda
