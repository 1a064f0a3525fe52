#include "backend/backend.h"

#include <cstdio>  // fprintf: the `auto` choice goes to stderr

#include "backend/cpu/cpu_backend.h"  // CpuBackend: always available
#include "core/error.h"

#ifdef DTRAIN_HAVE_CUDA
#include "backend/cuda_plugin.h"  // the CUDA backend, in a plugin loaded on first need
#endif

namespace dtrain {

namespace {
int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  int64_t span = in + 2 * pad - kernel;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // As PyTorch and Caffe: the last window must start inside the (left-padded) input.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}
}  // namespace

int64_t PoolSpec::out_height() const {
  return pooled_size(height, kernel_h, stride_h, pad_h, ceil_mode);
}
int64_t PoolSpec::out_width() const {
  return pooled_size(width, kernel_w, stride_w, pad_w, ceil_mode);
}

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
  std::unique_ptr<Backend> backend;
  switch (options.device) {
    case DeviceChoice::cpu:
      backend = std::make_unique<CpuBackend>();
      break;
    case DeviceChoice::cuda: {
#ifdef DTRAIN_HAVE_CUDA
      std::string why;
      const CudaBackendEntry* cuda = cuda_backend_entry(&why);
      DTRAIN_INPUT_CHECK(cuda) << "cluster.device: cuda, but " << why
                               << " (use cluster.device: auto or cpu)";
      backend = cuda->make_backend(options.local_rank, options.allow_tf32);  // InputError: no GPU
#else
      throw InputError(
          "cluster.device: cuda requested but this dtrain was built without CUDA "
          "(configure with -DDTRAIN_CUDA=ON on a machine with the CUDA toolkit)");
#endif
      break;
    }
    case DeviceChoice::auto_: {
      std::string why = "this dtrain was built without CUDA";
#ifdef DTRAIN_HAVE_CUDA
      // The driver first: the plugin (cudart, cuBLAS, cuDNN, NCCL) is loaded only for a GPU in
      // sight, and then tests the GPU for real.
      const CudaBackendEntry* cuda = nullptr;
      if (cuda_driver_sees_gpu(&why) && (cuda = cuda_backend_entry(&why)) &&
          cuda->device_usable(options.local_rank, &why)) {
        backend = cuda->make_backend(options.local_rank, options.allow_tf32);
        if (options.announce)
          std::fprintf(stderr, "cluster.device: auto picked %s\n", backend->name().c_str());
        break;
      }
#endif
      backend = std::make_unique<CpuBackend>();
      backend->set_num_threads(options.threads);
      if (options.announce)
        std::fprintf(stderr, "cluster.device: auto picked %s: %s\n", backend->name().c_str(),
                     why.c_str());
      return backend;
    }
  }
  backend->set_num_threads(options.threads);
  return backend;
}

}  // namespace dtrain
