// The GPU codecs (compress/cuda/device_codec.h) against the CPU codecs (compress/codec.h), the
// reference: the encoding byte for byte, decode and decode_add bit for bit (decode and
// decode_add read the CPU's encoding, so each is checked on its own), for the blocks the CPU
// tests use plus NaN, ±Inf, subnormals, FLT_MAX, the quantize8 zero threshold and round-half-
// even ties, at sizes around vector, warp and block widths, at offsets off any vector boundary,
// with guard bytes around every buffer: nothing may be written outside encoded_bytes(n) bytes
// or n floats. Without a usable GPU the binary runs nothing and exits 77: skipped
// (tests/backend/cuda_test_main.cpp).
#include <cuda_runtime_api.h>  // cudaMalloc, cudaMemcpyAsync, streams
#include <doctest/doctest.h>

#include <bit>      // bit_cast
#include <cfloat>   // FLT_MAX, FLT_MIN
#include <cmath>    // ldexp
#include <cstdint>  // uint32_t
#include <cstdio>   // snprintf: hex bytes in messages
#include <cstring>  // memcpy
#include <iostream>
#include <limits>  // quiet_NaN, infinity
#include <memory>
#include <string>
#include <vector>

#include "codec_test_data.h"             // make_block, BlockKind
#include "compress/codec.h"              // make_codec: the reference
#include "compress/cuda/device_codec.h"  // make_device_codec
#include "core/error.h"                  // InputError
#include "core/rng.h"                    // random_bits, random_uniform

using namespace dtrain;
using namespace dtrain::test;

namespace {

#define CUDA_OK(call)                                                                      \
  do {                                                                                     \
    const cudaError_t status_ = (call);                                                    \
    REQUIRE_MESSAGE(status_ == cudaSuccess, #call << ": " << cudaGetErrorString(status_)); \
  } while (0)

cudaStream_t stream() {
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    CUDA_OK(cudaStreamCreate(&created));
    return created;
  }();
  return s;
}

// `size` bytes on the GPU at `offset` bytes past a 256-byte boundary, between guard bytes.
class GuardedDevice {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kPattern = 0xA5;

  GuardedDevice(size_t size, size_t offset)
      : size_(size), offset_(offset), total_(kGuard + offset + size + kGuard) {
    CUDA_OK(cudaMalloc(&base_, total_));
    CUDA_OK(cudaMemsetAsync(base_, kPattern, total_, stream()));
  }
  ~GuardedDevice() { cudaFree(base_); }
  GuardedDevice(const GuardedDevice&) = delete;
  GuardedDevice& operator=(const GuardedDevice&) = delete;

  void* data() const { return static_cast<unsigned char*>(base_) + kGuard + offset_; }
  float* floats() const { return static_cast<float*>(data()); }
  void upload(const void* host) {
    if (size_ > 0) CUDA_OK(cudaMemcpyAsync(data(), host, size_, cudaMemcpyHostToDevice, stream()));
  }
  // Waits for the stream, then returns the payload; `guards_ok` says whether the bytes around
  // it are untouched.
  std::vector<unsigned char> download(bool* guards_ok) const {
    std::vector<unsigned char> all(total_);
    CUDA_OK(cudaMemcpyAsync(all.data(), base_, total_, cudaMemcpyDeviceToHost, stream()));
    CUDA_OK(cudaStreamSynchronize(stream()));
    *guards_ok = true;
    for (size_t k = 0; k < total_; ++k) {
      const bool inside = k >= kGuard + offset_ && k < kGuard + offset_ + size_;
      if (!inside && all[k] != kPattern) *guards_ok = false;
    }
    return std::vector<unsigned char>(
        all.begin() + static_cast<std::ptrdiff_t>(kGuard + offset_),
        all.begin() + static_cast<std::ptrdiff_t>(kGuard + offset_ + size_));
  }

 private:
  void* base_ = nullptr;
  size_t size_, offset_, total_;
};

// ---- blocks --------------------------------------------------------------------------------

// make_block's kinds (codec_test_data.h) and the special values the GPU kernels must treat as
// the CPU does. Every block has n elements.
struct Block {
  std::string kind;
  std::vector<float> x;
};

std::vector<Block> blocks(int64_t n) {
  if (n == 0) return {{"empty", {}}};  // no scale block: nothing written
  std::vector<Block> out;
  const uint64_t seed = 500 + static_cast<uint64_t>(n);
  for (BlockKind k : {BlockKind::gradient, BlockKind::mixed, BlockKind::negative,
                      BlockKind::one_huge, BlockKind::zeros, BlockKind::finite_bits})
    out.push_back({kind_name(k), make_block(k, n, seed)});
  const size_t m = static_cast<size_t>(n);
  const auto gradient = make_block(BlockKind::gradient, n, seed + 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();

  Block b{"nan", gradient};
  b.x[m / 2] = nan;
  out.push_back(b);
  b = {"nan with payload only in the low 16 bits", gradient};
  b.x[m / 3] = std::bit_cast<float>(0x7f800001u);
  b.x[m - 1] = std::bit_cast<float>(0xff800100u);
  out.push_back(b);
  b = {"+inf", gradient};
  b.x[m - 1] = inf;
  out.push_back(b);
  b = {"-inf", gradient};
  b.x[0] = -inf;
  out.push_back(b);
  b = {"tiny: subnormals, all below 127·FLT_MIN", std::vector<float>(m)};
  for (size_t i = 0; i < m; ++i)
    b.x[i] = ((random_bits(seed, 7, i) & 1) ? -1.0f : 1.0f) *
             std::ldexp(1.0f + random_uniform(seed, 8, i), -121 - static_cast<int>(i % 28));
  out.push_back(b);
  b = {"largest magnitude exactly 127·FLT_MIN", gradient};
  for (float& v : b.x) v *= 1e-36f;
  b.x[m / 2] = -127.0f * FLT_MIN;
  out.push_back(b);
  b = {"FLT_MAX", gradient};
  b.x[m / 4] = FLT_MAX;
  if (m > 1) b.x[m - 1] = -FLT_MAX;
  out.push_back(b);
  // Largest magnitude 127: quantize8 multiplies by 1, so x.5 values are exact ties.
  b = {"round-half-even ties", std::vector<float>(m)};
  const float ties[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 3.5f};
  for (size_t i = 0; i < m; ++i) b.x[i] = ties[i % 10];
  out.push_back(b);
  b = {"-0", std::vector<float>(m, -0.0f)};
  out.push_back(b);
  return out;
}

// ---- one block through one codec ----------------------------------------------------------

std::string hex_byte(unsigned char c) {
  char s[8];
  std::snprintf(s, sizeof s, "%02x", c);
  return s;
}
std::string hex_float(float v) {
  char s[16];
  std::snprintf(s, sizeof s, "%08x", std::bit_cast<uint32_t>(v));
  return s;
}

// First differing byte of a and b (same size), or -1.
int64_t first_byte_difference(const std::vector<unsigned char>& a, const unsigned char* b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return -1;
}
// First float whose bits differ, or -1.
int64_t first_float_difference(const std::vector<unsigned char>& got, const float* want, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t g;
    std::memcpy(&g, got.data() + 4 * i, 4);
    if (g != std::bit_cast<uint32_t>(want[i])) return static_cast<int64_t>(i);
  }
  return -1;
}
float float_at(const std::vector<unsigned char>& bytes, int64_t i) {
  float v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

// Where the buffers start: float buffers `float_offset` bytes and encoded buffers
// `byte_offset` bytes past a 256-byte boundary.
struct Layout {
  size_t float_offset, byte_offset;
};

// Encodes on both devices and compares; decodes and decode_adds the CPU's encoding on the GPU
// and compares with the CPU. Returns what differs first (empty: nothing).
std::string check_block(const Codec& cpu, const DeviceCodec& gpu, const Block& block, Layout at) {
  const std::vector<float>& x = block.x;
  const auto n = static_cast<int64_t>(x.size());
  const size_t m = x.size(), bytes = cpu.encoded_bytes(n);
  const std::string what = cpu.name() + ", " + block.kind + ", n " + std::to_string(n) +
                           ", floats at +" + std::to_string(at.float_offset) + ", encoding at +" +
                           std::to_string(at.byte_offset);
  if (gpu.encoded_bytes(n) != bytes)
    return what + ": encoded_bytes " + std::to_string(gpu.encoded_bytes(n)) + ", CPU " +
           std::to_string(bytes);
  std::vector<unsigned char> encoded(bytes + 1);  // + 1: data() of a non-empty vector
  std::vector<float> decoded(m + 1), summed(m + 1);
  cpu.encode(x.data(), n, encoded.data());
  cpu.decode(encoded.data(), n, decoded.data());
  for (size_t i = 0; i < m; ++i) summed[i] = 0.37f * static_cast<float>(i % 11) - 1.1f;
  const std::vector<float> base = summed;
  cpu.decode_add(encoded.data(), n, summed.data());

  bool guards = true;
  {  // encode
    GuardedDevice in(4 * m, at.float_offset), out(bytes, at.byte_offset);
    in.upload(x.data());
    gpu.encode(in.floats(), n, out.data(), stream());
    const auto got = out.download(&guards);
    const int64_t d = first_byte_difference(got, encoded.data());
    if (!guards) return what + ": encode wrote outside its encoded_bytes";
    if (d >= 0)
      return what + ": encode differs from the CPU's at byte " + std::to_string(d) + ": gpu " +
             hex_byte(got[d]) + ", cpu " + hex_byte(encoded[d]);
  }
  {  // decode
    GuardedDevice in(bytes, at.byte_offset), out(4 * m, at.float_offset);
    in.upload(encoded.data());
    gpu.decode(in.data(), n, out.floats(), stream());
    const auto got = out.download(&guards);
    const int64_t d = first_float_difference(got, decoded.data(), m);
    if (!guards) return what + ": decode wrote outside its n floats";
    if (d >= 0)
      return what + ": decode differs from the CPU's at [" + std::to_string(d) + "]: gpu " +
             hex_float(float_at(got, d)) + ", cpu " + hex_float(decoded[d]) + " (input " +
             hex_float(x[d]) + ")";
  }
  {  // decode_add
    GuardedDevice in(bytes, at.byte_offset), acc(4 * m, at.float_offset);
    in.upload(encoded.data());
    acc.upload(base.data());
    gpu.decode_add(in.data(), n, acc.floats(), stream());
    const auto got = acc.download(&guards);
    const int64_t d = first_float_difference(got, summed.data(), m);
    if (!guards) return what + ": decode_add wrote outside its n floats";
    if (d >= 0)
      return what + ": decode_add differs from the CPU's at [" + std::to_string(d) + "]: gpu " +
             hex_float(float_at(got, d)) + ", cpu " + hex_float(summed[d]) + " (input " +
             hex_float(x[d]) + ")";
  }
  return "";
}

// Around the widths kernels work in: 4 and 8 (vectors), 32 (a warp), 128 to 1024 (blocks),
// and large enough for a grid of blocks (quantize8: many scale blocks, the last one short).
constexpr int64_t kSizes[] = {0,   1,   2,    3,    4,    5,    7,    8,    9,     15,     16,
                              17,  31,  32,   33,   63,   64,   65,   127,  128,   129,    255,
                              256, 257, 1023, 1024, 1025, 4095, 4096, 4097, 65537, 1000003};

void check_all(const std::vector<Layout>& small_layouts, const std::vector<Layout>& large_layouts) {
  for (const std::string& name : codec_names()) {
    const auto cpu = make_codec(name);
    std::unique_ptr<DeviceCodec> gpu;
    try {
      gpu = make_device_codec(name);
    } catch (const std::exception& e) {
      FAIL_CHECK("make_device_codec(\"" << name << "\") threw: " << e.what());
      continue;
    }
    CHECK(gpu->name() == name);
    int64_t checked = 0, failed = 0;
    for (int64_t n : kSizes) {
      const auto& layouts = n <= 4097 ? small_layouts : large_layouts;
      for (const Block& block : blocks(n))
        for (const Layout& at : layouts) {
          ++checked;
          std::string difference;
          try {
            difference = check_block(*cpu, *gpu, block, at);
          } catch (const std::exception& e) {
            difference =
                name + ", " + block.kind + ", n " + std::to_string(n) + ": threw: " + e.what();
          }
          if (!difference.empty() && ++failed <= 10) FAIL_CHECK(difference);  // the first 10
        }
    }
    std::cout << "  " << (failed == 0 ? "ok    " : "FAIL  ") << name << ": " << checked
              << " blocks, " << failed << " differ from the CPU codec or wrote outside\n";
    CHECK_MESSAGE(failed == 0, name << ": " << failed << " of " << checked << " blocks differ");
  }
}

}  // namespace

TEST_CASE("make_device_codec knows the CPU codecs' names and rejects others") {
  for (const std::string& name : codec_names()) {
    const auto gpu = make_device_codec(name);
    CHECK(gpu->name() == name);
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000003}})
      CHECK(gpu->encoded_bytes(n) == make_codec(name)->encoded_bytes(n));
  }
  CHECK_THROWS_AS(make_device_codec("zip"), InputError);
  try {
    make_device_codec("quantise8");
    FAIL("no InputError for 'quantise8'");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("compression.name") != std::string::npos);
  }
}

// Floats 4-byte aligned (blocks start at elements of the flat buffer) but off any 16-byte
// vector; encodings at any byte (quantize8's 4 + n bytes may be packed back to back).
TEST_CASE("device codecs: the CPU's encoding byte for byte, decode and decode_add bit for bit") {
  std::cout << "[device codecs] encodings identical, decodes bit-identical, guards intact\n";
  check_all({{0, 0}, {4, 1}, {8, 2}, {12, 3}}, {{0, 0}, {12, 3}});
}
