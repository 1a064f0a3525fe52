// The plugin's extern "C" entry points of the backend (backend/cuda_plugin.h): dlsym needs
// unmangled names, and one table per module keeps them few.
#include "backend/cuda/cuda_backend.h"  // cuda_device_count, cuda_device_usable, make_cuda_backend
#include "backend/cuda_plugin.h"        // CudaBackendEntry, kCudaPluginAbi

extern "C" {

// Checked at load: the plugin and the program that loads it come from the same sources.
__attribute__((visibility("default"))) int dtrain_cuda_plugin_abi() {
  return dtrain::kCudaPluginAbi;
}

__attribute__((visibility("default"))) const dtrain::CudaBackendEntry* dtrain_cuda_backend_entry() {
  static const dtrain::CudaBackendEntry entry{
      &dtrain::cuda_device_count, &dtrain::cuda_device_usable, &dtrain::make_cuda_backend};
  return &entry;
}

}  // extern "C"
