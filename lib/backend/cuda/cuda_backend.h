// The CUDA backend: cuDNN for convolution, pooling, LRN and batch normalisation, cuBLAS for the
// Linear GEMMs, own kernels for the rest (loss, dropout, SGD, element-wise). Only the factory is
// public; everything else talks to it through Backend.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"  // Backend

namespace dtrain {

// Visible CUDA devices (0 when the driver or the runtime is missing: no exception).
int cuda_device_count();
// Whether GPU `local_rank % count` can be used; when not, `why` (if given) says why.
bool cuda_device_usable(int local_rank, std::string* why = nullptr);
// The backend on GPU `local_rank % count`; InputError naming cluster.device when none is usable.
std::unique_ptr<Backend> make_cuda_backend(int local_rank, bool allow_tf32 = false);

}  // namespace dtrain
