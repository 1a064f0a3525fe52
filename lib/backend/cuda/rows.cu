// A learned position table added to every sequence of a batch, and its gradient: the sum over
// the sequences, one thread per element of the row adding the sequences in order (no atomics),
// so that the result is the same bits on every call.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/sequence_kernels.h"

namespace dtrain::cuda {
namespace {

__global__ void add_to_rows_kernel(float* y, const float* row, int64_t n, int64_t row_len) {
  DTRAIN_GRID_STRIDE(i, n) y[i] += row[i % row_len];
}

__global__ void sum_rows_kernel(const float* x, float* out, int64_t rows, int64_t row_len) {
  DTRAIN_GRID_STRIDE(i, row_len) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) sum += x[r * row_len + i];
    out[i] = sum;
  }
}

}  // namespace

void add_to_rows_f32(float* y, const float* row, int64_t rows, int64_t row_len,
                     cudaStream_t stream) {
  const int64_t n = rows * row_len;
  if (n <= 0) return;
  add_to_rows_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, row, n, row_len);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

void sum_rows_f32(const float* x, float* out, int64_t rows, int64_t row_len, cudaStream_t stream) {
  if (row_len <= 0) return;
  sum_rows_kernel<<<grid_for(row_len), kThreads, 0, stream>>>(x, out, rows, row_len);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace dtrain::cuda
