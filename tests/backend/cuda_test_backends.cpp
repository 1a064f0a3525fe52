#include "cuda_test_backends.h"

#include <algorithm>  // clamp
#include <thread>     // hardware_concurrency: the reference's threads

#include "backend/cuda/cuda_backend.h"  // make_cuda_backend

namespace dtrain::cuda_test {

Backend& cpu_reference() {
  static Backend* backend =
      make_backend({DeviceChoice::cpu,
                    static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)), 0})
          .release();
  return *backend;
}

Backend& gpu() {
  static Backend* backend = make_cuda_backend(0, /*allow_tf32=*/false).release();
  return *backend;
}

}  // namespace dtrain::cuda_test
