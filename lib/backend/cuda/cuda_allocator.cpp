#include "backend/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include <algorithm>  // max: the peak
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>  // each allocation's size, for the peak

#include "backend/cuda/cuda_check.h"

namespace dtrain::cuda {
namespace {

class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    int current = 0;
    DTRAIN_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device_) {
      DTRAIN_CUDA_CHECK(cudaSetDevice(device_));
    }
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (current != device_) {
      DTRAIN_CUDA_CHECK(cudaSetDevice(current));
    }
    if (status == cudaSuccess) {
      // The sizes, for the peak: cudaFree is told only the pointer.
      std::lock_guard lock(mutex_);
      sizes_[p] = bytes;
      in_use_ += static_cast<int64_t>(bytes);
      peak_ = std::max(peak_, in_use_);
    }
    if (status != cudaSuccess) {
      size_t free_bytes = 0, total = 0;
      cudaGetLastError();  // clear the sticky-free allocation error
      cudaMemGetInfo(&free_bytes, &total);
      DTRAIN_CHECK(false) << "out of GPU memory on device " << device_ << " allocating " << bytes
                          << " bytes (" << free_bytes << " of " << total
                          << " bytes free): lower dataset.batch_size";
    }
    return p;
  }
  // Errors are ignored: at process exit the runtime may already be unloading.
  void deallocate(void* ptr) override {
    if (!ptr) return;
    {
      std::lock_guard lock(mutex_);
      auto it = sizes_.find(ptr);
      if (it != sizes_.end()) in_use_ -= static_cast<int64_t>(it->second), sizes_.erase(it);
    }
    cudaFree(ptr);
  }
  Device device() const override { return Device::cuda; }
  int64_t peak() const {
    std::lock_guard lock(mutex_);
    return peak_;
  }

 private:
  int device_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;
  int64_t in_use_ = 0, peak_ = 0;
};

class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    DTRAIN_CUDA_CHECK(cudaMallocHost(&p, bytes == 0 ? 64 : bytes));
    return p;
  }
  void deallocate(void* ptr) override {
    if (ptr) cudaFreeHost(ptr);
  }
  Device device() const override { return Device::cpu; }
};

}  // namespace

namespace {

DeviceAllocator& allocator_of(int device) {
  static std::mutex mutex;
  // Leaked on purpose: tensors freed during static destruction must still find it.
  static auto* allocators = new std::map<int, std::unique_ptr<DeviceAllocator>>();
  std::lock_guard lock(mutex);
  auto& slot = (*allocators)[device];
  if (!slot) slot = std::make_unique<DeviceAllocator>(device);
  return *slot;
}

}  // namespace

Allocator& device_allocator(int device) {
  return allocator_of(device);
}

int64_t device_peak_bytes(int device) {
  return allocator_of(device).peak();
}

int64_t device_total_bytes(int device) {
  int current = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) {
    DTRAIN_CUDA_CHECK(cudaSetDevice(device));
  }
  size_t free_bytes = 0, total = 0;
  DTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  if (current != device) {
    DTRAIN_CUDA_CHECK(cudaSetDevice(current));
  }
  return static_cast<int64_t>(total);
}

Allocator& pinned_allocator() {
  static auto* instance = new PinnedAllocator();
  return *instance;
}

}  // namespace dtrain::cuda
