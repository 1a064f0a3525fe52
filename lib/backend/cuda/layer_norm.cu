// Layer normalisation over the last axis: one warp per row for the forward and for dx, and the
// parameter gradients as column sums in two deterministic passes (chunks of rows, then the
// chunks in order). Every reduction has a fixed order, so equal inputs give equal bits.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/sequence_kernels.h"

namespace dtrain::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;  // rows per block of the per-row kernels
constexpr int kColumnThreads = 128;

// The sum over the warp, the same bits in every lane (a butterfly of commutative adds).
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void layer_norm_forward_kernel(const float* x, const float* gamma, const float* beta,
                                          float* y, float* mean, float* rstd, int64_t rows,
                                          int64_t features, float epsilon) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp: no block-wide synchronisation below
  const float* xr = x + row * features;
  float* yr = y + row * features;
  const float count = static_cast<float>(features);
  float sum = 0.0f;
  for (int64_t c = lane; c < features; c += 32) sum += xr[c];
  const float m = warp_sum(sum) / count;
  float squares = 0.0f;
  for (int64_t c = lane; c < features; c += 32) {
    const float d = xr[c] - m;
    squares += d * d;
  }
  const float r = 1.0f / sqrtf(warp_sum(squares) / count + epsilon);
  for (int64_t c = lane; c < features; c += 32) {
    const float v = (xr[c] - m) * r * gamma[c];
    yr[c] = beta ? v + beta[c] : v;
  }
  if (lane == 0) mean[row] = m, rstd[row] = r;
}

// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·gamma and x̂ = (x − mean)·rstd.
__global__ void layer_norm_dx_kernel(const float* x, const float* dy, const float* gamma,
                                     const float* mean, const float* rstd, float* dx, int64_t rows,
                                     int64_t features) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * features;
  const float* dyr = dy + row * features;
  float* dxr = dx + row * features;
  const float m = mean[row], r = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = lane; c < features; c += 32) {
    const float g = dyr[c] * gamma[c];
    sum_g += g;
    sum_gx += g * ((xr[c] - m) * r);
  }
  const float count = static_cast<float>(features);
  const float mean_g = warp_sum(sum_g) / count;
  const float mean_gx = warp_sum(sum_gx) / count;
  for (int64_t c = lane; c < features; c += 32) {
    const float g = dyr[c] * gamma[c];
    const float xhat = (xr[c] - m) * r;
    dxr[c] = r * (g - mean_g - xhat * mean_gx);
  }
}

// partials[chunk·features + c] = Σ over the chunk's rows, in order, of dy·x̂ (and of dy in the
// second half, when dbeta is wanted).
__global__ void layer_norm_partials_kernel(const float* x, const float* dy, const float* mean,
                                           const float* rstd, float* partials, int64_t rows,
                                           int64_t features, int64_t rows_per_chunk, int64_t chunks,
                                           bool with_beta) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  if (c >= features) return;
  const int64_t first = chunk * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  float sum_gamma = 0.0f, sum_beta = 0.0f;
  for (int64_t r = first; r < last; ++r) {
    const float d = dy[r * features + c];
    sum_gamma += d * ((x[r * features + c] - mean[r]) * rstd[r]);
    sum_beta += d;
  }
  partials[chunk * features + c] = sum_gamma;
  if (with_beta) partials[(chunks + chunk) * features + c] = sum_beta;
}

__global__ void layer_norm_param_grads_kernel(const float* partials, float* dgamma, float* dbeta,
                                              int64_t features, int64_t chunks) {
  DTRAIN_GRID_STRIDE(c, features) {
    float sum_gamma = 0.0f, sum_beta = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) {
      sum_gamma += partials[k * features + c];
      if (dbeta) sum_beta += partials[(chunks + k) * features + c];
    }
    dgamma[c] = sum_gamma;
    if (dbeta) dbeta[c] = sum_beta;
  }
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void layer_norm_forward_f32(const float* x, const float* gamma, const float* beta, float* y,
                            float* mean, float* rstd, int64_t rows, int64_t features, float epsilon,
                            cudaStream_t stream) {
  if (rows <= 0 || features <= 0) return;
  layer_norm_forward_kernel<<<row_blocks(rows), kWarpsPerBlock * 32, 0, stream>>>(
      x, gamma, beta, y, mean, rstd, rows, features, epsilon);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

// A few hundred chunks at most: enough columns × chunks of threads for the partial sums, and a
// short sequential sum over the chunks.
int64_t layer_norm_rows_per_chunk(int64_t max_rows) {
  constexpr int64_t kMaxChunks = 256, kMinRows = 16;
  const int64_t per_chunk = (max_rows + kMaxChunks - 1) / kMaxChunks;
  return per_chunk > kMinRows ? per_chunk : kMinRows;
}

void layer_norm_backward_f32(const float* x, const float* dy, const float* gamma, const float* mean,
                             const float* rstd, float* dx, float* dgamma, float* dbeta,
                             int64_t rows, int64_t features, int64_t rows_per_chunk,
                             float* partials, cudaStream_t stream) {
  if (features <= 0) return;
  if (rows <= 0) {
    DTRAIN_CUDA_CHECK(cudaMemsetAsync(dgamma, 0, features * sizeof(float), stream));
    if (dbeta) DTRAIN_CUDA_CHECK(cudaMemsetAsync(dbeta, 0, features * sizeof(float), stream));
    return;
  }
  layer_norm_dx_kernel<<<row_blocks(rows), kWarpsPerBlock * 32, 0, stream>>>(
      x, dy, gamma, mean, rstd, dx, rows, features);
  DTRAIN_CUDA_CHECK_LAUNCH();
  const int64_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  const dim3 grid(static_cast<unsigned>((features + kColumnThreads - 1) / kColumnThreads),
                  static_cast<unsigned>(chunks));
  layer_norm_partials_kernel<<<grid, kColumnThreads, 0, stream>>>(
      x, dy, mean, rstd, partials, rows, features, rows_per_chunk, chunks, dbeta != nullptr);
  DTRAIN_CUDA_CHECK_LAUNCH();
  layer_norm_param_grads_kernel<<<grid_for(features), kThreads, 0, stream>>>(
      partials, dgamma, dbeta, features, chunks);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace dtrain::cuda
