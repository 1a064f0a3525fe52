// Rows of a position table: add_to_rows adds one row to every row of a batch, sum_rows is its
// gradient. Columns are independent, so both run over columns in parallel and each column's sum
// runs over the rows in order: the same bits for any thread count.
#include <algorithm>  // min
#include "backend/cpu/cpu_backend.h"

#include "core/error.h"

namespace dtrain {
namespace {
// Below this many elements one thread is faster than waking a team.
constexpr int64_t kParallelThreshold = 1 << 16;

int64_t rows_of(const Tensor& x, const Tensor& row, const char* what) {
  DTRAIN_CHECK(x.dtype() == DType::f32 && row.dtype() == DType::f32 && x.device() == Device::cpu &&
               row.device() == Device::cpu)
      << what << ": expected host f32 tensors";
  const int64_t width = row.numel();
  DTRAIN_CHECK(width > 0 && x.numel() % width == 0)
      << what << ": " << x.shape().str() << " is not a whole number of rows of " << width;
  return x.numel() / width;
}
}  // namespace

void CpuBackend::add_to_rows(const Tensor& y, const Tensor& row) {
  const int64_t rows = rows_of(y, row, "add_to_rows"), width = row.numel();
  float* out = y.data<float>();
  const float* r = row.data<float>();
#pragma omp parallel for if (y.numel() > kParallelThreshold) num_threads(threads_)
  for (int64_t n = 0; n < rows; ++n) {
    float* dst = out + n * width;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) dst[c] += r[c];
  }
}

void CpuBackend::sum_rows(const Tensor& x, const Tensor& out) {
  const int64_t rows = rows_of(x, out, "sum_rows"), width = out.numel();
  const float* in = x.data<float>();
  float* sum = out.data<float>();
  // Column chunks of 256: a chunk's running sums stay in cache while the rows stream past.
  constexpr int64_t kChunk = 256;
  const int64_t chunks = (width + kChunk - 1) / kChunk;
#pragma omp parallel for if (x.numel() > kParallelThreshold) num_threads(threads_)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk, end = std::min(width, begin + kChunk);
    float* s = sum + begin;
#pragma omp simd
    for (int64_t c = 0; c < end - begin; ++c) s[c] = 0.0f;
    for (int64_t n = 0; n < rows; ++n) {
      const float* src = in + n * width + begin;
#pragma omp simd
      for (int64_t c = 0; c < end - begin; ++c) s[c] += src[c];
    }
  }
}

}  // namespace dtrain
