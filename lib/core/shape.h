// Shape: the dimensions of a tensor, outermost first (NCHW for images, [batch, features] for
// dense activations, [out, in] for Linear weights, [out, in, kh, kw] for Conv2d weights).
#pragma once
#include <cstdint>           // int64_t
#include <initializer_list>  // Shape{2, 3}
#include <string>
#include <vector>

namespace dtrain {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[i < 0 ? i + rank() : i]; }
  int64_t& operator[](int i) { return dims_[i < 0 ? i + rank() : i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t numel() const;
  // The same shape with the outermost (batch) dimension replaced.
  Shape with_batch(int64_t batch) const;
  // Everything but the outermost dimension, e.g. the per-sample shape.
  Shape inner() const;
  std::string str() const;  // "[100, 784]"

  bool operator==(const Shape&) const = default;

 private:
  std::vector<int64_t> dims_;
};

}  // namespace dtrain
