// Embedding on its own kernels (embedding.cu): a gather forward and a sorted, atomics-free
// scatter-add backward. The sort's scratch is allocated once, for the spec's number of ids.
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/sequence_kernels.h"
#include "core/error.h"

namespace dtrain::cuda {
namespace {

class CudaEmbedding final : public EmbeddingOp {
 public:
  CudaEmbedding(CudaContext& ctx, const EmbeddingSpec& spec) : ctx_(ctx), spec_(spec) {
    DTRAIN_CHECK(spec.rows >= 0 && spec.vocab > 0 && spec.dim > 0)
        << "embedding: " << spec.rows << " ids, vocabulary " << spec.vocab << ", dimension "
        << spec.dim;
    scratch_bytes_ = embedding_backward_scratch_bytes(spec.rows, spec.vocab);
    if (scratch_bytes_ > 0)
      scratch_ = Tensor::empty({static_cast<int64_t>(scratch_bytes_)}, DType::u8, ctx.allocator());
  }
  // The ids given may be fewer than the spec's (a smaller last batch).
  void forward(const Tensor& ids, const Tensor& table, const Tensor& y) override {
    const int64_t rows = check_ids(ids, "embedding forward");
    check_device_f32(table, spec_.vocab * spec_.dim, "embedding forward table");
    check_device_f32(y, rows * spec_.dim, "embedding forward y");
    embedding_forward_f32(ids.data<float>(), table.data<float>(), y.data<float>(), rows,
                          spec_.vocab, spec_.dim, ctx_.stream());
  }
  void backward(const Tensor& ids, const Tensor& dy, const Tensor& dtable,
                bool accumulate) override {
    const int64_t rows = check_ids(ids, "embedding backward");
    check_device_f32(dy, rows * spec_.dim, "embedding backward dy");
    check_device_f32(dtable, spec_.vocab * spec_.dim, "embedding backward dtable");
    embedding_backward_f32(
        ids.data<float>(), dy.data<float>(), dtable.data<float>(), rows, spec_.vocab, spec_.dim,
        accumulate, scratch_.defined() ? scratch_.raw() : nullptr, scratch_bytes_, ctx_.stream());
  }

 private:
  int64_t check_ids(const Tensor& ids, const char* what) const {
    check_device_f32(ids, 0, what);
    DTRAIN_CHECK(ids.numel() <= spec_.rows)
        << what << ": " << ids.numel() << " ids, the op was made for " << spec_.rows;
    return ids.numel();
  }

  CudaContext& ctx_;
  EmbeddingSpec spec_;
  Tensor scratch_;  // the backward's sort: keys, rows and CUB's temporary storage
  size_t scratch_bytes_ = 0;
};

}  // namespace

std::unique_ptr<EmbeddingOp> make_embedding(CudaContext& ctx, const EmbeddingSpec& spec) {
  return std::make_unique<CudaEmbedding>(ctx, spec);
}

}  // namespace dtrain::cuda
