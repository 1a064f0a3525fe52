// Gradient codecs for the ring all-reduce (docs/architecture.md, decision 4, Pipe-SGD §3.2 and Fig.
// 3b): every block of the flat gradient buffer is encoded before it is sent and decoded — and, in
// the reduce-scatter, summed into the local block in the same pass — after it is received. The
// codecs are element-wise and light, so that their cost hides behind the compressed transfer.
//
// Buffers: `in`/`out` of encode and decode may have any alignment (blocks start wherever the ring
// split the flat buffer); encode writes exactly encoded_bytes(n) bytes, decode reads exactly as
// many, and neither touches memory beyond that. Input and output must not overlap.
#pragma once
#include <cstddef>  // size_t
#include <cstdint>  // int64_t
#include <memory>   // unique_ptr: make_codec's result
#include <string>
#include <vector>

namespace dtrain {

class Codec {
 public:
  virtual ~Codec() = default;
  // The `compression.name` that selects it: "none", "truncate16" or "quantize8".
  virtual std::string name() const = 0;
  // Size of the encoding of n floats, headers (such as quantize8's scale) included.
  virtual size_t encoded_bytes(int64_t n) const = 0;
  virtual void encode(const float* in, int64_t n, void* out) const = 0;
  // out[i] = decode(in)[i].
  virtual void decode(const void* in, int64_t n, float* out) const = 0;
  // out[i] += decode(in)[i]: the reduce step, fused. Bit-identical to decode into a temporary
  // followed by an element-wise float add (no FMA contraction).
  virtual void decode_add(const void* in, int64_t n, float* out) const = 0;
  // Upper bound on |decode(encode(x))_i − x_i| for a finite block whose largest magnitude is
  // block_max_abs and whose element has magnitude value_abs. Tests and the all-reduce error
  // analysis use it.
  virtual double error_bound(double block_max_abs, double value_abs) const = 0;
  // Raw float bytes per encoded byte for large blocks: 1, 2, ~4.
  virtual double compression_ratio() const = 0;
};

// The codec called `name`; InputError naming `compression.name` and the known names otherwise.
std::unique_ptr<Codec> make_codec(const std::string& name);

// The names make_codec knows, in the order the config documents them.
const std::vector<std::string>& codec_names();

}  // namespace dtrain
