// The codecs of compress/codec.h on GPU buffers, for the gradient ring all-reduce over NCCL
// (Pipe-SGD Fig. 3b on the GPU). The encoding is the CPU codec's byte for byte (quantize8: a
// float scale, then one int8 per value; truncate16: the high half of each float), so that the
// two sides can be compared and mixed. Every call only enqueues on `stream`; `in` and `out`
// are device pointers and must not overlap. Encoded buffers may have any alignment, float
// buffers must be 4-byte aligned. quantize8 keeps a 4-byte device word per codec object for its
// block maximum: one object encodes on one stream at a time.
#pragma once
#include <cuda_runtime_api.h>  // cudaStream_t

#include <cstddef>  // size_t
#include <cstdint>  // int64_t
#include <memory>
#include <string>

namespace dtrain {

class DeviceCodec {
 public:
  virtual ~DeviceCodec() = default;
  virtual std::string name() const = 0;
  // Same as Codec::encoded_bytes of the codec with this name.
  virtual size_t encoded_bytes(int64_t n) const = 0;
  virtual void encode(const float* in, int64_t n, void* out, cudaStream_t stream) const = 0;
  virtual void decode(const void* in, int64_t n, float* out, cudaStream_t stream) const = 0;
  // out[i] += decode(in)[i], bit-identical to the CPU codec's decode_add.
  virtual void decode_add(const void* in, int64_t n, float* out, cudaStream_t stream) const = 0;
};

// The GPU version of make_codec(name) ("none", "truncate16", "quantize8"); InputError naming
// compression.name otherwise.
std::unique_ptr<DeviceCodec> make_device_codec(const std::string& name);

}  // namespace dtrain
