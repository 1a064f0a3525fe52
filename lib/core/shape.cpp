#include "core/shape.h"

#include "core/error.h"

namespace dtrain {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

Shape Shape::with_batch(int64_t batch) const {
  DTRAIN_CHECK(rank() > 0) << "with_batch on a scalar shape";
  Shape s = *this;
  s.dims_[0] = batch;
  return s;
}

Shape Shape::inner() const {
  DTRAIN_CHECK(rank() > 0) << "inner() of a scalar shape";
  return Shape(std::vector<int64_t>(dims_.begin() + 1, dims_.end()));
}

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

}  // namespace dtrain
