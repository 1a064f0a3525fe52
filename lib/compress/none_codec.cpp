// NoneCodec: the raw float bytes; the reduce step is the only arithmetic.
#include <cstring>  // std::memcpy

#include "compress/codec_kernels.h"
#include "compress/codecs.h"

namespace dtrain {

size_t NoneCodec::encoded_bytes(int64_t n) const {
  return static_cast<size_t>(n) * sizeof(float);
}

void NoneCodec::encode(const float* in, int64_t n, void* out) const {
  std::memcpy(out, in, encoded_bytes(n));
}

void NoneCodec::decode(const void* in, int64_t n, float* out) const {
  std::memcpy(out, in, encoded_bytes(n));
}

void NoneCodec::decode_add(const void* in, int64_t n, float* out) const {
  codec_kernels::best::add_f32(in, n, out);
}

}  // namespace dtrain
