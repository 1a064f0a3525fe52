// The GPU codecs: the loops of codec_kernels_portable.cpp and the block logic of the CPU codecs
// as grid-stride kernels, operation for operation, so that encodings are byte-identical and
// decodes bit-identical to the CPU's:
//   - every float operation is an explicit round-to-nearest intrinsic (__fmul_rn, __fadd_rn,
//     __fdiv_rn), and the library also builds with -fmad=false: no FMA contraction; denormals
//     are kept (no -ftz), as on the CPU;
//   - a CUDA operation whose result is NaN gives the canonical 0x7fffffff, whereas x86 returns
//     the first NaN operand, quieted, or 0xffc00000 for 0·Inf and Inf − Inf; add_like_x86 and
//     mul_like_x86 put x86's NaN back, so that NaN results match the CPU's too.
// Floats travel as bits wherever the CPU moves bits (truncate16, the none codec's copies).
//
// quantize8 encodes in one kernel, one CUDA block per scale block of 1024 values (the CPU's
// Quantize8Codec::kScaleBlock): the block's max |x| reduced in shared memory, then its header and
// its int8s, each thread deriving the scale and 127/M from that maximum as the CPU does.
#include "compress/cuda/device_codec.h"

#include <cuda_runtime.h>  // kernel launches, cudaMemcpyAsync, cudaMalloc, device intrinsics

#include <algorithm>  // std::min
#include <cfloat>     // FLT_MIN
#include <cstdint>    // uint32_t, uintptr_t

#include "compress/codec.h"   // make_codec (names and sizes), codec_names
#include "compress/codecs.h"  // Quantize8Codec::kScaleBlock: the format
#include "core/error.h"       // Error, InputError, CheckFailure

// A failed CUDA runtime call → dtrain::Error naming the call and CUDA's error string. (The
// backend's DTRAIN_CUDA_CHECK is the same, but compress must not depend on the backend.)
#define DTRAIN_CODEC_CUDA_CHECK(call)                                                         \
  if (const cudaError_t dtrain_codec_status_ = (call); dtrain_codec_status_ == cudaSuccess) { \
  } else                                                                                      \
    ::dtrain::detail::CheckFailure<::dtrain::Error>(__FILE__, __LINE__, nullptr)              \
        << __FILE__ << ":" << __LINE__ << ": " << #call                                       \
        << " failed: " << cudaGetErrorString(dtrain_codec_status_)

namespace dtrain {

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // independent loads in flight per thread (memory-level parallelism)
// About one full wave of 256-thread blocks on an H100 (132 SMs × 8); the grid-stride loops
// cover the rest.
constexpr int64_t kMaxBlocks = 1024;

constexpr uint32_t kAbsMask = 0x7fffffffu, kInfBits = 0x7f800000u;
constexpr uint32_t kQuietBit = 0x00400000u;
constexpr uint32_t kQuietBit16 = 0x0040u;             // the quiet bit in the upper half of a float
constexpr uint32_t kQuietNanBits = 0x7fc00000u;       // std::numeric_limits<float>::quiet_NaN()
constexpr uint32_t kX86DefaultNanBits = 0xffc00000u;  // x86's "real indefinite"
// quantize8, as in quantize8_codec.cpp and codec_kernels_portable.cpp.
constexpr float kLevels = 127.0f;
constexpr float kMinMaxAbs = kLevels * FLT_MIN;
constexpr float kRoundMagic = 12582912.0f;  // 1.5·2^23: (v + magic) − magic rounds half to even
constexpr int64_t kHeaderBytes = 4;
constexpr int64_t kScaleBlock = Quantize8Codec::kScaleBlock;          // values per scale
constexpr int64_t kScaleBlockBytes = kHeaderBytes + kScaleBlock;      // a full block's encoding
constexpr int kPerThread = static_cast<int>(kScaleBlock / kThreads);  // values per thread
static_assert(kScaleBlock % kThreads == 0, "a scale block is a whole number of thread rounds");

unsigned grid_for(int64_t n) {
  constexpr int64_t kPerBlock = int64_t{kThreads} * kUnroll;
  return static_cast<unsigned>(std::min((n + kPerBlock - 1) / kPerBlock, kMaxBlocks));
}

bool is_aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// --- device helpers ----------------------------------------------------------------------------

// Grid-stride loop over [0, n) that issues the loads of kUnroll elements before any of their
// stores: store(i, load(i)) for every i, with consecutive threads on consecutive elements.
template <typename Load, typename Store>
__device__ void for_each_element(int64_t n, Load load, Store store) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; base < n;
       base += kUnroll * stride) {
    decltype(load(base)) v[kUnroll] = {};
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (base + k * stride < n) v[k] = load(base + k * stride);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (base + k * stride < n) store(base + k * stride, v[k]);
  }
}

// Native-order (little-endian) values at any byte address, one byte at a time.
__device__ uint32_t load_u32_bytes(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
__device__ void store_u32_bytes(unsigned char* p, uint32_t v) {
  p[0] = static_cast<unsigned char>(v);
  p[1] = static_cast<unsigned char>(v >> 8);
  p[2] = static_cast<unsigned char>(v >> 16);
  p[3] = static_cast<unsigned char>(v >> 24);
}
__device__ uint32_t load_u16_bytes(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8;
}
__device__ void store_u16_bytes(unsigned char* p, uint32_t v) {
  p[0] = static_cast<unsigned char>(v);
  p[1] = static_cast<unsigned char>(v >> 8);
}

__device__ bool is_nan_bits(uint32_t bits) {
  return (bits & kAbsMask) > kInfBits;
}

// The NaN that an x86 SSE/AVX instruction gives for an operation on (a, b) whose result is NaN:
// its first NaN source operand, quieted, or the default NaN when neither is a NaN.
__device__ float x86_nan(float a, float b) {
  const uint32_t a_bits = __float_as_uint(a), b_bits = __float_as_uint(b);
  if (is_nan_bits(a_bits)) return __uint_as_float(a_bits | kQuietBit);
  if (is_nan_bits(b_bits)) return __uint_as_float(b_bits | kQuietBit);
  return __uint_as_float(kX86DefaultNanBits);
}
__device__ float add_like_x86(float a, float b) {
  const float sum = __fadd_rn(a, b);
  return is_nan_bits(__float_as_uint(sum)) ? x86_nan(a, b) : sum;
}
__device__ float mul_like_x86(float a, float b) {
  const float product = __fmul_rn(a, b);
  return is_nan_bits(__float_as_uint(product)) ? x86_nan(a, b) : product;
}

__device__ uint32_t max_u32(uint32_t a, uint32_t b) {
  return a > b ? a : b;
}

// The maximum of v over the block (of kThreads threads), valid in thread 0.
__device__ uint32_t block_max(uint32_t v) {
  constexpr int kWarps = kThreads / 32;
  __shared__ uint32_t warp_max[kWarps];
  for (int offset = 16; offset > 0; offset /= 2)
    v = max_u32(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < kWarps ? warp_max[threadIdx.x] : 0u;
    for (int offset = 16; offset > 0; offset /= 2)
      v = max_u32(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// --- decoders: element i of an encoded block, as a float ---------------------------------------
// bind() gives the per-thread form.

// none: the raw float bytes; kAligned when they start on a 4-byte boundary.
template <bool kAligned>
struct RawF32 {
  const unsigned char* bytes;
  __device__ RawF32 bind() const { return *this; }
  __device__ float operator()(int64_t i) const {
    if constexpr (kAligned)
      return reinterpret_cast<const float*>(bytes)[i];
    else
      return __uint_as_float(load_u32_bytes(bytes + 4 * i));
  }
};

// truncate16: the upper half of the float, zeros below; kAligned for a 2-byte boundary.
template <bool kAligned>
struct Truncated16 {
  const unsigned char* bytes;
  __device__ Truncated16 bind() const { return *this; }
  __device__ float operator()(int64_t i) const {
    uint32_t half;
    if constexpr (kAligned)
      half = reinterpret_cast<const uint16_t*>(bytes)[i];
    else
      half = load_u16_bytes(bytes + 2 * i);
    return __uint_as_float(half << 16);
  }
};

// quantize8: q_i · scale, each scale block's float scale (4 bytes, any alignment) before its
// int8s.
struct Quantized8 {
  const unsigned char* bytes;
  __device__ Quantized8 bind() const { return *this; }
  __device__ float operator()(int64_t i) const {
    const unsigned char* block = bytes + (i / kScaleBlock) * kScaleBlockBytes;
    const float scale = __uint_as_float(load_u32_bytes(block));
    const auto q = static_cast<int8_t>(block[kHeaderBytes + i % kScaleBlock]);
    return mul_like_x86(static_cast<float>(q), scale);
  }
};

// out[i] = decode(i), or with kAdd out[i] += decode(i). The CPU's compiled `out[i] += v` takes
// v as the first source operand (checked for GCC 12 on the truncate16 and quantize8 loops and
// the AVX-512 body of add_f32), which only matters when both are NaNs.
template <bool kAdd, typename Decoder>
__global__ void decode_kernel(Decoder decoder, int64_t n, float* out) {
  const auto decode = decoder.bind();
  if constexpr (kAdd) {
    for_each_element(
        n, [=](int64_t i) { return make_float2(decode(i), out[i]); },
        [=](int64_t i, float2 v) { out[i] = add_like_x86(v.x, v.y); });
  } else {
    for_each_element(
        n, [=](int64_t i) { return decode(i); }, [=](int64_t i, float v) { out[i] = v; });
  }
}

template <bool kAdd, typename Decoder>
void launch_decode(Decoder decoder, int64_t n, float* out, cudaStream_t stream) {
  decode_kernel<kAdd><<<grid_for(n), kThreads, 0, stream>>>(decoder, n, out);
  DTRAIN_CODEC_CUDA_CHECK(cudaGetLastError());
}

// --- encoders ----------------------------------------------------------------------------------

// truncate16_encode of codec_kernels_portable.cpp; kAligned when out is on a 2-byte boundary.
template <bool kAligned>
__global__ void truncate16_encode_kernel(const float* in, int64_t n, unsigned char* out) {
  for_each_element(
      n, [=](int64_t i) { return __float_as_uint(in[i]); },
      [=](int64_t i, uint32_t bits) {
        const uint32_t half = (bits >> 16) | (is_nan_bits(bits) ? kQuietBit16 : 0u);
        if constexpr (kAligned)
          reinterpret_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(half);
        else
          store_u16_bytes(out + 2 * i, half);
      });
}

// The block-level decisions of Quantize8Codec::encode, from the bits of the block's max |x|.
struct Quantize8Params {
  uint32_t scale_bits;  // the header
  float inv_scale;      // 127 / M
  bool quantize;        // scale > 0: otherwise every q is 0
};

__device__ Quantize8Params quantize8_params(uint32_t max_bits) {
  if (max_bits >= kInfBits) return {kQuietNanBits, 0.0f, false};  // NaN or Inf in the block
  const float max_abs = __uint_as_float(max_bits);
  if (!(max_abs >= kMinMaxAbs)) return {0u, 0.0f, false};  // scale 0
  uint32_t scale_bits = __float_as_uint(__fdiv_rn(max_abs, kLevels));
  // nextafter(scale, 0) where 127·scale overflows (M = FLT_MAX): scale is positive and normal.
  if ((__float_as_uint(__fmul_rn(kLevels, __uint_as_float(scale_bits))) & kAbsMask) >= kInfBits)
    scale_bits -= 1;
  return {scale_bits, __fdiv_rn(kLevels, max_abs), true};
}

// One scale block per CUDA block: max_abs_bits of codec_kernels_portable.cpp over its values,
// then the header and the int8s of Quantize8Codec::encode.
__global__ void quantize8_encode_kernel(const float* in, int64_t n, unsigned char* out) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kScaleBlock;
  const int64_t count = n - first < kScaleBlock ? n - first : kScaleBlock;
  float x[kPerThread];
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kThreads;
    x[j] = i < count ? in[first + i] : 0.0f;
    m = max_u32(m, __float_as_uint(x[j]) & kAbsMask);
  }
  __shared__ uint32_t block_bits;
  m = block_max(m);
  if (threadIdx.x == 0) block_bits = m;
  __syncthreads();
  const Quantize8Params params = quantize8_params(block_bits);
  unsigned char* bytes = out + static_cast<int64_t>(blockIdx.x) * kScaleBlockBytes;
  if (threadIdx.x == 0) store_u32_bytes(bytes, params.scale_bits);
  auto* q = reinterpret_cast<int8_t*>(bytes + kHeaderBytes);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(j) * kThreads;
    if (i >= count) continue;
    if (!params.quantize) {
      q[i] = 0;
      continue;
    }
    const float product = __fmul_rn(x[j], params.inv_scale);
    const float rounded = __fsub_rn(__fadd_rn(product, kRoundMagic), kRoundMagic);
    q[i] = static_cast<int8_t>(static_cast<int32_t>(rounded));
  }
}

// --- the codecs --------------------------------------------------------------------------------

// Name and sizes come from the CPU codec of the same name, so that the two cannot disagree.
class DeviceCodecBase : public DeviceCodec {
 public:
  explicit DeviceCodecBase(const std::string& name) : cpu_(make_codec(name)) {}
  std::string name() const override { return cpu_->name(); }
  size_t encoded_bytes(int64_t n) const override { return cpu_->encoded_bytes(n); }

 private:
  std::unique_ptr<Codec> cpu_;
};

void check_float_alignment(const float* p) {
  DTRAIN_CHECK(is_aligned(p, alignof(float))) << "float buffer " << p << " is not 4-byte aligned";
}

class NoneDeviceCodec final : public DeviceCodecBase {
 public:
  NoneDeviceCodec() : DeviceCodecBase("none") {}

  void encode(const float* in, int64_t n, void* out, cudaStream_t stream) const override {
    if (n <= 0) return;
    DTRAIN_CODEC_CUDA_CHECK(
        cudaMemcpyAsync(out, in, encoded_bytes(n), cudaMemcpyDeviceToDevice, stream));
  }
  void decode(const void* in, int64_t n, float* out, cudaStream_t stream) const override {
    if (n <= 0) return;
    DTRAIN_CODEC_CUDA_CHECK(
        cudaMemcpyAsync(out, in, encoded_bytes(n), cudaMemcpyDeviceToDevice, stream));
  }
  void decode_add(const void* in, int64_t n, float* out, cudaStream_t stream) const override {
    if (n <= 0) return;
    check_float_alignment(out);
    const auto* bytes = static_cast<const unsigned char*>(in);
    if (is_aligned(in, sizeof(float)))
      launch_decode<true>(RawF32<true>{bytes}, n, out, stream);
    else
      launch_decode<true>(RawF32<false>{bytes}, n, out, stream);
  }
};

class Truncate16DeviceCodec final : public DeviceCodecBase {
 public:
  Truncate16DeviceCodec() : DeviceCodecBase("truncate16") {}

  void encode(const float* in, int64_t n, void* out, cudaStream_t stream) const override {
    if (n <= 0) return;
    check_float_alignment(in);
    auto* bytes = static_cast<unsigned char*>(out);
    if (is_aligned(out, sizeof(uint16_t)))
      truncate16_encode_kernel<true><<<grid_for(n), kThreads, 0, stream>>>(in, n, bytes);
    else
      truncate16_encode_kernel<false><<<grid_for(n), kThreads, 0, stream>>>(in, n, bytes);
    DTRAIN_CODEC_CUDA_CHECK(cudaGetLastError());
  }
  void decode(const void* in, int64_t n, float* out, cudaStream_t stream) const override {
    run<false>(in, n, out, stream);
  }
  void decode_add(const void* in, int64_t n, float* out, cudaStream_t stream) const override {
    run<true>(in, n, out, stream);
  }

 private:
  template <bool kAdd>
  static void run(const void* in, int64_t n, float* out, cudaStream_t stream) {
    if (n <= 0) return;
    check_float_alignment(out);
    const auto* bytes = static_cast<const unsigned char*>(in);
    if (is_aligned(in, sizeof(uint16_t)))
      launch_decode<kAdd>(Truncated16<true>{bytes}, n, out, stream);
    else
      launch_decode<kAdd>(Truncated16<false>{bytes}, n, out, stream);
  }
};

class Quantize8DeviceCodec final : public DeviceCodecBase {
 public:
  Quantize8DeviceCodec() : DeviceCodecBase("quantize8") {}

  void encode(const float* in, int64_t n, void* out, cudaStream_t stream) const override {
    if (n <= 0) return;  // no scale blocks: nothing to write, as on the CPU
    check_float_alignment(in);
    const auto blocks = static_cast<unsigned>((n + kScaleBlock - 1) / kScaleBlock);
    quantize8_encode_kernel<<<blocks, kThreads, 0, stream>>>(in, n,
                                                             static_cast<unsigned char*>(out));
    DTRAIN_CODEC_CUDA_CHECK(cudaGetLastError());
  }
  void decode(const void* in, int64_t n, float* out, cudaStream_t stream) const override {
    if (n <= 0) return;
    check_float_alignment(out);
    launch_decode<false>(Quantized8{static_cast<const unsigned char*>(in)}, n, out, stream);
  }
  void decode_add(const void* in, int64_t n, float* out, cudaStream_t stream) const override {
    if (n <= 0) return;
    check_float_alignment(out);
    launch_decode<true>(Quantized8{static_cast<const unsigned char*>(in)}, n, out, stream);
  }
};

}  // namespace

std::unique_ptr<DeviceCodec> make_device_codec(const std::string& name) {
  if (name == "none") return std::make_unique<NoneDeviceCodec>();
  if (name == "truncate16") return std::make_unique<Truncate16DeviceCodec>();
  if (name == "quantize8") return std::make_unique<Quantize8DeviceCodec>();
  std::string known;
  for (const std::string& codec : codec_names()) known += (known.empty() ? "" : ", ") + codec;
  DTRAIN_INPUT_CHECK(false) << "compression.name: expected one of " << known << ", got '" << name
                            << "'";
  return nullptr;  // not reached: the check throws
}

}  // namespace dtrain
