// Embedding gather and its deterministic scatter-add. The backward sorts (id, row) pairs with
// CUB's stable radix sort, so the rows of each id lie together in increasing row order, and one
// thread per (run of equal ids, column) adds them in that order: no atomics, the same bits on
// every call whatever the ids.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/sequence_kernels.h"
#include "core/error.h"

namespace dtrain::cuda {
namespace {

constexpr int kColumnThreads = 128;  // columns of one run per block in the backward

// The table row an id names, or `vocab` for an id that names none (negative, too large, NaN,
// not an integer).
__device__ inline uint32_t table_row(float id, int64_t vocab) {
  const bool valid = id >= 0.0f && id < static_cast<float>(vocab) && id == floorf(id);
  return valid ? static_cast<uint32_t>(id) : static_cast<uint32_t>(vocab);
}

__global__ void embedding_forward_kernel(const float* ids, const float* table, float* y, int64_t n,
                                         int64_t vocab, int64_t dim) {
  DTRAIN_GRID_STRIDE(i, n) {
    const uint32_t v = table_row(ids[i / dim], vocab);
    y[i] = v < vocab ? table[v * dim + i % dim] : __int_as_float(0x7fc00000);  // NaN
  }
}

__global__ void embedding_keys_kernel(const float* ids, uint32_t* keys, uint32_t* rows, int64_t n,
                                      int64_t vocab) {
  DTRAIN_GRID_STRIDE(i, n) {
    keys[i] = table_row(ids[i], vocab);
    rows[i] = static_cast<uint32_t>(i);
  }
}

// Block (k, column block): if sorted position k starts a run of equal ids, its threads add the
// run's rows of dy, in increasing row order, into dtable's row of that id.
__global__ void embedding_backward_kernel(const uint32_t* keys, const uint32_t* rows,
                                          const float* dy, float* dtable, int64_t n, int64_t vocab,
                                          int64_t dim, bool accumulate) {
  const int64_t k = blockIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  const uint32_t key = keys[k];
  if (key >= vocab || (k > 0 && keys[k - 1] == key)) return;
  float sum = 0.0f;
  for (int64_t j = k; j < n && keys[j] == key; ++j) sum += dy[rows[j] * dim + c];
  float* out = dtable + key * dim + c;
  *out = accumulate ? *out + sum : sum;
}

// Scratch layout: keys in and out, rows in and out, then CUB's temporary storage, each
// aligned to 256 bytes.
constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}
// Key bits to sort on: enough for 0 … vocab (vocab marks invalid ids).
int sort_bits(int64_t vocab) {
  int bits = 1;
  while ((int64_t{1} << bits) <= vocab) ++bits;
  return bits;
}
size_t cub_bytes(int64_t rows, int64_t vocab) {
  size_t bytes = 0;
  DTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<int>(rows), 0, sort_bits(vocab)));
  return bytes;
}

}  // namespace

void embedding_forward_f32(const float* ids, const float* table, float* y, int64_t rows,
                           int64_t vocab, int64_t dim, cudaStream_t stream) {
  const int64_t n = rows * dim;
  if (n <= 0) return;
  embedding_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(ids, table, y, n, vocab, dim);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

size_t embedding_backward_scratch_bytes(int64_t rows, int64_t vocab) {
  DTRAIN_CHECK(rows >= 0 && rows < (int64_t{1} << 31) && vocab > 0 && vocab < (int64_t{1} << 31))
      << "embedding: " << rows << " ids of a " << vocab << "-row table are beyond the kernels";
  if (rows == 0) return 0;
  return 4 * aligned(static_cast<size_t>(rows) * sizeof(uint32_t)) +
         aligned(cub_bytes(rows, vocab));
}

void embedding_backward_f32(const float* ids, const float* dy, float* dtable, int64_t rows,
                            int64_t vocab, int64_t dim, bool accumulate, void* scratch,
                            size_t scratch_bytes, cudaStream_t stream) {
  if (vocab <= 0 || dim <= 0) return;
  if (!accumulate)
    DTRAIN_CUDA_CHECK(cudaMemsetAsync(dtable, 0, vocab * dim * sizeof(float), stream));
  if (rows <= 0) return;
  DTRAIN_CHECK(scratch_bytes >= embedding_backward_scratch_bytes(rows, vocab))
      << "embedding backward: " << scratch_bytes << " bytes of scratch for " << rows << " ids";
  const size_t array = aligned(static_cast<size_t>(rows) * sizeof(uint32_t));
  char* base = static_cast<char*>(scratch);
  auto* keys_in = reinterpret_cast<uint32_t*>(base);
  auto* keys_out = reinterpret_cast<uint32_t*>(base + array);
  auto* rows_in = reinterpret_cast<uint32_t*>(base + 2 * array);
  auto* rows_out = reinterpret_cast<uint32_t*>(base + 3 * array);
  void* temp = base + 4 * array;
  size_t temp_bytes = cub_bytes(rows, vocab);

  embedding_keys_kernel<<<grid_for(rows), kThreads, 0, stream>>>(ids, keys_in, rows_in, rows,
                                                                 vocab);
  DTRAIN_CUDA_CHECK_LAUNCH();
  DTRAIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, rows_in,
                                                    rows_out, static_cast<int>(rows), 0,
                                                    sort_bits(vocab), stream));
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((dim + kColumnThreads - 1) / kColumnThreads));
  DTRAIN_CHECK(grid.y <= 65535) << "embedding backward: " << dim << " columns are too many";
  embedding_backward_kernel<<<grid, kColumnThreads, 0, stream>>>(keys_out, rows_out, dy, dtable,
                                                                 rows, vocab, dim, accumulate);
  DTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace dtrain::cuda
