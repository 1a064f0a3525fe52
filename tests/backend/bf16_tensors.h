// The bf16 tests' reference casts, element by element with cpu/bf16.h (round to nearest even),
// independent of the backend's reorders they check.
#pragma once
#include <doctest/doctest.h>

#include "backend/cpu/bf16.h"
#include "core/tensor.h"

namespace dtrain::test {

inline Tensor to_bf16(const Tensor& f) {
  Tensor b = Tensor::empty(f.shape(), DType::bf16);
  for (int64_t i = 0; i < f.numel(); ++i)
    b.data<cpu::bf16_t>()[i] = cpu::f32_to_bf16(f.data<float>()[i]);
  return b;
}

inline Tensor to_f32(const Tensor& b) {
  REQUIRE(b.dtype() == DType::bf16);
  Tensor f = Tensor::empty(b.shape());
  for (int64_t i = 0; i < b.numel(); ++i)
    f.data<float>()[i] = cpu::bf16_to_f32(b.data<cpu::bf16_t>()[i]);
  return f;
}

}  // namespace dtrain::test
