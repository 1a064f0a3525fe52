// Element types and devices of tensors.
#pragma once
#include <cstddef>  // size_t
#include <cstdint>  // fixed-width integers
#include <string_view>

namespace dtrain {

enum class DType : uint8_t { f32, f16, bf16, i32, u8 };
enum class Device : uint8_t { cpu, cuda };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::i32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::u8:
      return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::u8:
      return "u8";
  }
  return "?";
}

constexpr std::string_view device_name(Device d) {
  return d == Device::cpu ? "cpu" : "cuda";
}

}  // namespace dtrain
