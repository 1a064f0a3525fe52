// PENDING (sequence-model ops, being written): each definition here is replaced by its CPU
// implementation in a file of its own, and this file goes.
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"  // DTRAIN_CHECK

namespace dtrain {

std::unique_ptr<EmbeddingOp> CpuBackend::make_embedding(const EmbeddingSpec&) {
  DTRAIN_CHECK(false) << "PENDING: cpu embedding";
  return nullptr;
}
std::unique_ptr<LayerNormOp> CpuBackend::make_layer_norm(const LayerNormSpec&) {
  DTRAIN_CHECK(false) << "PENDING: cpu layer_norm";
  return nullptr;
}
std::unique_ptr<AttentionOp> CpuBackend::make_attention(const AttentionSpec&) {
  DTRAIN_CHECK(false) << "PENDING: cpu attention";
  return nullptr;
}
void CpuBackend::add_to_rows(const Tensor&, const Tensor&) {
  DTRAIN_CHECK(false) << "PENDING: cpu add_to_rows";
}
void CpuBackend::sum_rows(const Tensor&, const Tensor&) {
  DTRAIN_CHECK(false) << "PENDING: cpu sum_rows";
}

}  // namespace dtrain
