// Tensor: a shape, a dtype and a pointer into storage that lives on one device.
// Storage is either owned (shared between views, freed by its Allocator) or borrowed (a view
// into memory someone else owns, e.g. a layer's slice of the flat parameter buffer).
// Tensors do no arithmetic themselves: operations live behind Backend.
#pragma once
#include <cstddef>  // size_t
#include <memory>   // shared_ptr: storage shared between views

#include "core/dtype.h"  // DType, Device
#include "core/shape.h"  // Shape

namespace dtrain {

// Memory of one device. The CPU allocator is always available; backends provide the others.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) = 0;
  virtual Device device() const = 0;
};

// 64-byte aligned host memory (one cache line, one AVX-512 register).
Allocator& cpu_allocator();
// Page-aligned host memory that the system commits page by page as it is written: untouched
// memory reads as zero and takes none (a sharded run's whole-model buffers, of which a rank
// holds only its shard and the segments in use: Backend::reserve).
Allocator& cpu_lazy_allocator();
// Gives the pages wholly inside [data, data + bytes) back to the system; they read as zero
// afterwards (anonymous memory only: what the allocators above return).
void release_host_pages(void* data, size_t bytes);

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised memory from `alloc`.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32,
                      Allocator& alloc = cpu_allocator());
  // Host memory set to zero.
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  // A non-owning view of memory the caller keeps alive.
  static Tensor borrow(void* data, const Shape& shape, DType dtype = DType::f32,
                       Device device = Device::cpu);

  // A default-constructed tensor is undefined and has no elements (a rank-0 shape would
  // otherwise count as one scalar).
  bool defined() const { return data_ != nullptr || (shape_.rank() > 0 && shape_.numel() == 0); }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t numel() const { return defined() ? shape_.numel() : 0; }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  void* raw() const { return data_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }

  // Same memory, another shape of equal element count.
  Tensor reshape(const Shape& shape) const;
  // A contiguous sub-range [offset, offset + shape.numel()) of this tensor's elements, viewed
  // with `shape`: how layers see their part of the flat parameter and gradient buffers.
  Tensor slice(int64_t offset, const Shape& shape) const;
  // `shape` elements of `dtype` from byte `byte_offset` of this tensor's memory on: one arena
  // holding tensors of several dtypes (the graph's activations under mixed precision).
  Tensor view_bytes(int64_t byte_offset, const Shape& shape, DType dtype) const;
  // The first `batch` rows (outermost dimension) of this tensor: a smaller last batch.
  Tensor narrow_batch(int64_t batch) const;

 private:
  std::shared_ptr<void> storage_;  // keeps owned memory alive; empty for borrowed views
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

}  // namespace dtrain
