// The CUDA plugin, libdtrain_cuda.so: the CUDA backend, the GPU codecs and the NCCL transports
// (lib/*/cuda/), the only part of dtrain that links cudart, cuBLAS, cuDNN and NCCL. The host code
// loads it on first need, so that a run on the CPU never maps those libraries (they doubled the
// resident memory of a small CPU run). The plugin takes the rest of dtrain (Tensor, Comm, the
// codecs, ...) from the program that loads it, which exports them (cmake/cuda_plugin.cmake): one
// copy of every piece of state. Only built with DTRAIN_CUDA (DTRAIN_HAVE_CUDA defined).
#pragma once
#include <memory>  // unique_ptr: the backend the plugin makes
#include <string>

namespace dtrain {

class Backend;

// What the host code and the plugin must agree on: bump with any change of an entry table
// (here and in comm/cuda/plugin_entry.h) or of the Backend class (its virtual functions). A
// plugin of another ABI is refused at load.
inline constexpr int kCudaPluginAbi = 3;

// The plugin's backend (backend/cuda/cuda_backend.h), from its dtrain_cuda_backend_entry().
struct CudaBackendEntry {
  int (*device_count)();
  bool (*device_usable)(int local_rank, std::string* why);
  std::unique_ptr<Backend> (*make_backend)(int local_rank, bool allow_tf32);
};

// Whether the CUDA driver (libcuda.so.1: cuInit, cuDeviceGetCount) sees a GPU, without loading
// the plugin; when not, `why` says why. For `cluster.device: auto`, before the real test.
bool cuda_driver_sees_gpu(std::string* why);

// The address of the plugin's extern "C" symbol `name`, loading the plugin on the first call
// (already linked into the program, next to it, in ../lib beside it, in the build tree, or on the
// library path); null, with `why` saying why, when the plugin cannot be loaded.
void* cuda_plugin_symbol(const char* name, std::string* why);

// The backend entry points; null, with `why` saying why, when the plugin cannot be loaded.
const CudaBackendEntry* cuda_backend_entry(std::string* why);

}  // namespace dtrain
