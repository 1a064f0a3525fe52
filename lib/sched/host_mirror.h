// HostMirror: a host view of a tensor for code that works on host memory (the parameter server's
// MPI pushes and the host codecs). For host tensors it is the tensor itself and the transfers do
// nothing; for device tensors it is a pinned copy that download() fills and upload() writes back.
#pragma once
#include "backend/backend.h"  // Backend: copies, host allocator
#include "core/tensor.h"

namespace dtrain {

class HostMirror {
 public:
  HostMirror(Backend& backend, const Tensor& tensor)
      : backend_(backend),
        tensor_(tensor),
        host_(tensor.device() == Device::cpu
                  ? tensor
                  : Tensor::empty(tensor.shape(), tensor.dtype(), backend.host_allocator())) {}

  const Tensor& host() const { return host_; }
  // host() ← the tensor, complete on return.
  void download() {
    if (host_.raw() == tensor_.raw()) return;
    backend_.copy(host_, tensor_);
    backend_.synchronize();
  }
  // The tensor ← host(), complete on return (host() may be overwritten right after).
  void upload() {
    if (host_.raw() == tensor_.raw()) return;
    backend_.copy(tensor_, host_);
    backend_.synchronize();
  }

 private:
  Backend& backend_;
  Tensor tensor_;
  Tensor host_;
};

}  // namespace dtrain
