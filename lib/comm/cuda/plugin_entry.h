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
  // A number that differs between any two GPUs of a cluster (host name and PCI bus id): the
  // NCCL vote of comm/host_transport.cpp finds ranks that share a GPU with it.
  double (*gpu_identity)(int device);
  std::unique_ptr<GradientTransport> (*make_device_transport)(Comm& comm, Backend& backend,
                                                              const std::string& codec,
                                                              int64_t max_elements, bool use_nccl);
};

double gpu_identity(int device);  // comm/cuda/device_transports.cpp

}  // namespace dtrain
