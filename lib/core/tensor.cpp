#include "core/tensor.h"

#include <cstdlib>  // aligned_alloc, free
#include <cstring>  // memset

#include "core/error.h"

namespace dtrain {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    // aligned_alloc wants a multiple of the alignment; never ask for 0 bytes.
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    DTRAIN_CHECK(p != nullptr) << "out of host memory allocating " << bytes << " bytes";
    return p;
  }
  void deallocate(void* ptr) override { std::free(ptr); }
  Device device() const override { return Device::cpu; }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator instance;
  return instance;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Allocator& alloc) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = alloc.device();
  void* p = alloc.allocate(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  t.storage_ = std::shared_ptr<void>(p, [&alloc](void* q) { alloc.deallocate(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.data_, 0, t.bytes());
  return t;
}

Tensor Tensor::borrow(void* data, const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  DTRAIN_CHECK(shape.numel() == numel())
      << "reshape " << shape_.str() << " -> " << shape.str() << " changes the element count";
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice(int64_t offset, const Shape& shape) const {
  DTRAIN_CHECK(offset >= 0 && offset + shape.numel() <= numel())
      << "slice [" << offset << ", " << offset + shape.numel() << ") outside " << numel()
      << " elements";
  Tensor t = *this;
  t.shape_ = shape;
  t.data_ = static_cast<char*>(data_) + offset * static_cast<int64_t>(dtype_size(dtype_));
  return t;
}

Tensor Tensor::narrow_batch(int64_t batch) const {
  DTRAIN_CHECK(shape_.rank() > 0 && batch >= 0 && batch <= shape_[0])
      << "narrow_batch(" << batch << ") of " << shape_.str();
  return slice(0, shape_.with_batch(batch));
}

}  // namespace dtrain
