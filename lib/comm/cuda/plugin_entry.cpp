// The plugin's extern "C" entry point of comm (comm/cuda/plugin_entry.h). The host code defines
// a function of the same name (make_device_transport in comm/host_transport.cpp, which forwards
// here): the plugin is linked with -Bsymbolic-functions, so that these addresses are its own.
#include "comm/cuda/plugin_entry.h"

extern "C" __attribute__((visibility("default"))) const dtrain::CudaCommEntry*
dtrain_cuda_comm_entry() {
  static const dtrain::CudaCommEntry entry{&dtrain::gpu_identity, &dtrain::make_device_transport};
  return &entry;
}
