// The CPU backend's activation layouts: which channel block its ops prefer, and the reorders
// and channel copies between and within layouts (ops.h ChannelBlock).
#include <cstdlib>  // getenv: DTRAIN_PLAIN_LAYOUTS
#include <cstring>  // memcpy

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace dtrain {

namespace {
bool has_avx512() {
  return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
}
}  // namespace

ChannelBlock CpuBackend::preferred_block(int64_t channels) const {
  // DTRAIN_PLAIN_LAYOUTS=1 keeps every activation plain (NCHW): the previous engine, for
  // comparisons and the blocked-versus-plain tests of whole runs.
  static const bool plain = [] {
    const char* v = std::getenv("DTRAIN_PLAIN_LAYOUTS");
    return v != nullptr && v[0] == '1';
  }();
  if (plain) return 1;
  const ChannelBlock block = has_avx512() ? 16 : 8;  // one vector register of f32
  return channels % block == 0 ? block : 1;
}

ChannelBlock CpuBackend::conv_output_block(const ConvSpec& s) const {
  // Blocked where oneDNN's blocked kernels do well: whole blocks of input channels, or the
  // few channels of a first layer, which oneDNN reads from plain NCHW. Convolutions with a few
  // channels run on the direct NCHW kernels (direct_conv.h) and stay plain.
  const ChannelBlock block = preferred_block(s.out_channels);
  const bool input_ok = preferred_block(s.in_channels) == block || s.in_channels <= 4;
  return block > 1 && input_ok ? block : 1;
}

void CpuBackend::reorder(const Tensor& dst, ChannelBlock dst_block, const Tensor& src,
                         ChannelBlock src_block) {
  DTRAIN_CHECK(dst.numel() == src.numel() && dst.dtype() == DType::f32 && src.dtype() == DType::f32)
      << "reorder: " << src.shape().str() << " into " << dst.shape().str();
  if (dst_block == src_block) return copy(dst, src);
  const Shape& s = src.shape();
  DTRAIN_CHECK(s.rank() == 4 && s[1] % dst_block == 0 && s[1] % src_block == 0)
      << "reorder of " << s.str() << " between blocks " << src_block << " and " << dst_block;
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  const float* from = src.data<float>();
  float* to = dst.data<float>();
  // One (n, c) plane per task: rows of W pixels, gathered or scattered with a stride.
#pragma omp parallel for collapse(2) if (src.numel() > (1 << 16))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const float* in = from + blocked_index(n, c, 0, 0, C, H, W, src_block);
      float* out = to + blocked_index(n, c, 0, 0, C, H, W, dst_block);
      for (int64_t p = 0; p < H * W; ++p) out[p * dst_block] = in[p * src_block];
    }
}

void CpuBackend::copy_channels(const Tensor& dst, int64_t dst_first, const Tensor& src,
                               int64_t src_first, int64_t channels, ChannelBlock block) {
  const Shape& d = dst.shape();
  const Shape& s = src.shape();
  DTRAIN_CHECK(d.rank() == 4 && s.rank() == 4 && d[0] == s[0] && d[2] == s[2] && d[3] == s[3] &&
               dst_first + channels <= d[1] && src_first + channels <= s[1] && d[1] % block == 0 &&
               s[1] % block == 0)
      << "copy_channels: " << channels << " channels from " << s.str() << " to " << d.str()
      << " in blocks of " << block;
  const int64_t N = d[0], H = d[2], W = d[3];
  const float* from = src.data<float>();
  float* to = dst.data<float>();
#pragma omp parallel for collapse(2) if (dst.numel() > (1 << 16))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const float* in = from + blocked_index(n, src_first + c, 0, 0, s[1], H, W, block);
      float* out = to + blocked_index(n, dst_first + c, 0, 0, d[1], H, W, block);
      for (int64_t p = 0; p < H * W; ++p) out[p * block] = in[p * block];
    }
}

}  // namespace dtrain
