// The CUDA plugin's gradient transports (backend/cuda_plugin.h says what the plugin is): the
// NCCL and host-staging transports of comm/cuda/device_transports.cpp, which comm/
// host_transport.cpp reaches through this table. No CUDA header: host code includes it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "comm/gradient_transport.h"  // GradientTransport, Comm, Backend

namespace dtrain {

// From the plugin's dtrain_cuda_comm_entry(); a change here is a change of kCudaPluginAbi.
struct CudaCommEntry {
  bool (*nccl_usable_everywhere)(Comm& comm, Backend* backend, const std::string& choice);
  std::unique_ptr<GradientTransport> (*make_device_transport)(Comm& comm, Backend& backend,
                                                              const std::string& codec,
                                                              int64_t max_elements, bool use_nccl);
};

}  // namespace dtrain
