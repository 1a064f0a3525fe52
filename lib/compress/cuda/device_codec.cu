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
// quantize8 encodes in two kernels: a max |x| reduction (atomicMax of the magnitude bits into a
// 4-byte device word owned by the codec object, allocated on the first encode, on the current
// device), then the quantisation, whose threads each derive scale and 127/M from that word.
// Hence the encodes of one Quantize8 DeviceCodec must not run concurrently on different streams
// (decodes may); the header of the output cannot hold the maximum instead, as it may be
// unaligned (no atomics) and is overwritten while other blocks still read it.
#include "compress/cuda/device_codec.h"

#include <cuda_runtime.h>  // kernel launches, cudaMemcpyAsync, cudaMalloc, device intrinsics

#include <algorithm>  // std::min
#include <cfloat>     // FLT_MIN
#include <cstdint>    // uint32_t, uintptr_t
#include <mutex>      // std::once_flag: quantize8's scratch word, allocated on first use

#include "compress/codec.h"  // make_codec (names and sizes), codec_names
#include "core/error.h"      // Error, InputError, CheckFailure

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
// cover the rest. It also bounds the atomics of quantize8's reduction to one per block.
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
// bind() gives the per-thread form (quantize8 reads its header there, once per thread).

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

// quantize8: q_i · scale, the float scale (4 bytes, any alignment) first.
struct Quantized8 {
  const unsigned char* bytes;
  struct Bound {
    const int8_t* q;
    float scale;
    __device__ float operator()(int64_t i) const {
      return mul_like_x86(static_cast<float>(q[i]), scale);
    }
  };
  __device__ Bound bind() const {
    return {reinterpret_cast<const int8_t*>(bytes + kHeaderBytes),
            __uint_as_float(load_u32_bytes(bytes))};
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

// max_abs_bits of codec_kernels_portable.cpp, merged into *max_bits (which starts at 0).
__global__ void max_abs_bits_kernel(const float* in, int64_t n, unsigned* max_bits) {
  uint32_t m = 0;
  for_each_element(
      n, [=](int64_t i) { return __float_as_uint(in[i]) & kAbsMask; },
      [&](int64_t, uint32_t bits) { m = max_u32(m, bits); });
  m = block_max(m);
  if (threadIdx.x == 0 && m != 0) atomicMax(max_bits, m);
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

// The header and the int8s, once *max_bits holds the block's max_abs_bits.
__global__ void quantize8_encode_kernel(const float* in, int64_t n, const unsigned* max_bits,
                                        unsigned char* out) {
  const Quantize8Params params = quantize8_params(*max_bits);
  if (blockIdx.x == 0 && threadIdx.x == 0) store_u32_bytes(out, params.scale_bits);
  auto* q = reinterpret_cast<int8_t*>(out + kHeaderBytes);
  if (params.quantize) {
    const float inv_scale = params.inv_scale;
    for_each_element(
        n, [=](int64_t i) { return in[i]; },
        [=](int64_t i, float x) {
          const float product = __fmul_rn(x, inv_scale);
          const float rounded = __fsub_rn(__fadd_rn(product, kRoundMagic), kRoundMagic);
          q[i] = static_cast<int8_t>(static_cast<int32_t>(rounded));
        });
  } else {
    for_each_element(
        n, [](int64_t) { return 0; }, [=](int64_t i, int) { q[i] = 0; });
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
  Quantize8DeviceCodec(const Quantize8DeviceCodec&) = delete;
  Quantize8DeviceCodec& operator=(const Quantize8DeviceCodec&) = delete;
  ~Quantize8DeviceCodec() override {
    if (max_bits_) static_cast<void>(cudaFree(max_bits_));  // no throwing at teardown
  }

  void encode(const float* in, int64_t n, void* out, cudaStream_t stream) const override {
    if (n <= 0) {  // max_abs_bits of nothing is 0: scale 0, as the CPU writes
      DTRAIN_CODEC_CUDA_CHECK(cudaMemsetAsync(out, 0, kHeaderBytes, stream));
      return;
    }
    check_float_alignment(in);
    unsigned* max_bits = scratch();
    auto* bytes = static_cast<unsigned char*>(out);
    DTRAIN_CODEC_CUDA_CHECK(cudaMemsetAsync(max_bits, 0, sizeof(unsigned), stream));
    max_abs_bits_kernel<<<grid_for(n), kThreads, 0, stream>>>(in, n, max_bits);
    DTRAIN_CODEC_CUDA_CHECK(cudaGetLastError());
    quantize8_encode_kernel<<<grid_for(n), kThreads, 0, stream>>>(in, n, max_bits, bytes);
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

 private:
  // The reduction's result word, on the device current at the first encode.
  unsigned* scratch() const {
    std::call_once(scratch_once_,
                   [this] { DTRAIN_CODEC_CUDA_CHECK(cudaMalloc(&max_bits_, sizeof(unsigned))); });
    return max_bits_;
  }

  mutable std::once_flag scratch_once_;
  mutable unsigned* max_bits_ = nullptr;
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
