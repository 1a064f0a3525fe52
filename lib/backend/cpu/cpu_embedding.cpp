// Embedding: the forward gathers table rows; the backward scatter-adds output gradients into
// the rows the ids name. Threads split the table's columns, and each column takes the rows in
// order, so no two threads touch one element and the sums come out in one fixed order: the
// same bits for any thread count, as ops.h asks.
#include <algorithm>  // min
#include <cstring>    // memcpy, memset

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace dtrain::cpu {
namespace {

// Below this many elements one thread is faster than waking a team.
constexpr int64_t kParallelThreshold = 1 << 15;

class CpuEmbedding final : public EmbeddingOp {
 public:
  explicit CpuEmbedding(const EmbeddingSpec& s) : spec_(s) {}

  void forward(const Tensor& ids, const Tensor& table, const Tensor& y) override {
    const int64_t rows = ids.numel(), dim = spec_.dim;
    check(ids, table, y, rows);
    const float* id = ids.data<float>();
    const float* t = table.data<float>();
    float* out = y.data<float>();
#pragma omp parallel for if (rows * dim > kParallelThreshold)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out + r * dim, t + static_cast<int64_t>(id[r]) * dim, dim * sizeof(float));
  }

  void backward(const Tensor& ids, const Tensor& dy, const Tensor& dtable,
                bool accumulate) override {
    const int64_t rows = ids.numel(), dim = spec_.dim;
    check(ids, dtable, dy, rows);
    const float* id = ids.data<float>();
    const float* g = dy.data<float>();
    float* d = dtable.data<float>();
    if (!accumulate) {
      const int64_t n = dtable.numel();
#pragma omp parallel for simd if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) d[i] = 0.0f;
    }
    // Columns in chunks of 64 (four vectors): each chunk's rows of dy and of the table are
    // whole cache lines.
    constexpr int64_t kChunk = 64;
    const int64_t chunks = (dim + kChunk - 1) / kChunk;
#pragma omp parallel for if (rows * dim > kParallelThreshold)
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t begin = k * kChunk, width = std::min(dim, begin + kChunk) - begin;
      for (int64_t r = 0; r < rows; ++r) {
        float* dst = d + static_cast<int64_t>(id[r]) * dim + begin;
        const float* src = g + r * dim + begin;
#pragma omp simd
        for (int64_t c = 0; c < width; ++c) dst[c] += src[c];
      }
    }
  }

 private:
  // Sizes, and every id a row of the table: one pass over N·T floats, cheap beside the copy.
  void check(const Tensor& ids, const Tensor& table, const Tensor& rows_tensor,
             int64_t rows) const {
    DTRAIN_CHECK(rows <= spec_.rows && table.numel() == spec_.vocab * spec_.dim &&
                 rows_tensor.numel() == rows * spec_.dim)
        << "embedding: sizes differ from the op's (" << spec_.rows << " ids, " << spec_.vocab
        << " × " << spec_.dim << " table)";
    const float* id = ids.data<float>();
    const auto vocab = static_cast<float>(spec_.vocab);
    int64_t bad = -1;
    for (int64_t r = 0; r < rows && bad < 0; ++r)
      if (!(id[r] >= 0.0f && id[r] < vocab &&
            id[r] == static_cast<float>(static_cast<int64_t>(id[r]))))
        bad = r;
    DTRAIN_CHECK(bad < 0) << "embedding: id " << id[bad] << " at position " << bad
                          << " is not a row of a table of " << spec_.vocab;
  }

  EmbeddingSpec spec_;
};

}  // namespace

std::unique_ptr<EmbeddingOp> make_embedding(const EmbeddingSpec& spec) {
  DTRAIN_CHECK(spec.vocab > 0 && spec.dim > 0 && spec.rows >= 0) << "embedding: bad spec";
  return std::make_unique<CpuEmbedding>(spec);
}

}  // namespace dtrain::cpu
