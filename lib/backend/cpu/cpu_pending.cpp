// PENDING (sequence-model ops, being written): each definition here is replaced by its CPU
// implementation in a file of its own, and this file goes.
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"  // DTRAIN_CHECK

namespace dtrain {

void CpuBackend::adamw_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const AdamWHyper&) {
  DTRAIN_CHECK(false) << "PENDING: cpu adamw_step";
}

}  // namespace dtrain
