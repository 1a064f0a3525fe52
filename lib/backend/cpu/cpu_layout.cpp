// The CPU backend's activation layouts: which channel block its ops prefer, and the reorders
// and channel copies between and within layouts (ops.h ChannelBlock). Reorders that change the
// dtype (mixed precision's casts, f32 ↔ bf16) or move bf16 between blocks run on oneDNN reorder
// primitives, one pass each, built once per shape and kept; f32 reorders between blocks keep
// their own loop.
#include <cstdlib>  // getenv: DTRAIN_PLAIN_LAYOUTS
#include <cstring>  // memcpy
#include <map>      // ReorderCache
#include <mutex>    // ReorderCache
#include <tuple>    // ReorderCache's key

#include "backend/cpu/bf16.h"  // bf16_t
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace dtrain {

namespace cpu {

// oneDNN reorder primitives by (dims, dtypes, blocks), with their memories, whose data pointers
// are set per call. Tensors with the same block on both sides (a cast only) reorder as flat 1-D
// buffers (any rank: only the count matters), so one primitive serves every shape of that count.
// oneDNN casts with the CPU's conversion instruction, which rounds to nearest even as bf16.h does
// but reads f32 subnormals (below 2^-126) as zero; bf16.h keeps them. A mutex guards the map
// and the shared memories: the communication thread may cast while the compute thread does.
class ReorderCache {
 public:
  void run(const Tensor& dst, ChannelBlock dst_block, const Tensor& src, ChannelBlock src_block) {
    const bool flat = dst_block == src_block;
    const Shape& s = src.shape();
    DTRAIN_CHECK(flat || (s.rank() == 4 && s[1] % dst_block == 0 && s[1] % src_block == 0))
        << "reorder of " << s.str() << " between blocks " << src_block << " and " << dst_block;
    const dnnl_dims dims = flat ? dnnl_dims{src.numel()} : to_dims(s);
    const Key key{dims, src.dtype(), dst.dtype(), src_block, dst_block};
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, make(dims, key)).first;
    Entry& e = it->second;
    e.from.set_data_handle(src.raw());
    e.to.set_data_handle(dst.raw());
    e.primitive.execute(engine_stream_, e.from, e.to);
  }

 private:
  using Key = std::tuple<dnnl_dims, DType, DType, ChannelBlock, ChannelBlock>;
  struct Entry {
    dnnl::reorder primitive;
    dnnl::memory from, to;
  };

  static dnnl::memory::data_type dnnl_type(DType t) {
    DTRAIN_CHECK(t == DType::f32 || t == DType::bf16)
        << "reorder: " << dtype_name(t) << " tensors are not activations";
    return t == DType::f32 ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
  }
  static dnnl::memory::desc desc(const dnnl_dims& dims, DType t, ChannelBlock block) {
    const dnnl_tag tag = dims.size() == 1 ? dnnl_tag::a
                         : block == 1     ? dnnl_tag::nchw
                         : block == 8     ? dnnl_tag::nChw8c
                                          : dnnl_tag::nChw16c;
    DTRAIN_CHECK(block == 1 || block == 8 || block == 16) << "reorder: no blocks of " << block;
    return dnnl::memory::desc(dims, dnnl_type(t), tag);
  }
  Entry make(const dnnl_dims& dims, const Key& key) {
    const auto& [_, from_type, to_type, from_block, to_block] = key;
    dnnl::memory from(desc(dims, from_type, from_block), engine_, DNNL_MEMORY_NONE);
    dnnl::memory to(desc(dims, to_type, to_block), engine_, DNNL_MEMORY_NONE);
    return Entry{dnnl::reorder(from, to), from, to};
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream engine_stream_{engine_};
  std::mutex mutex_;
  std::map<Key, Entry> cache_;
};

}  // namespace cpu

namespace {
bool has_avx512() {
  return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
}

// copy_channels' loop for elements of type T (f32 or bf16: a copy needs no arithmetic).
template <class T>
void copy_channel_planes(const Tensor& dst, int64_t dst_first, const Tensor& src, int64_t src_first,
                         int64_t channels, ChannelBlock block) {
  const Shape& d = dst.shape();
  const Shape& s = src.shape();
  const int64_t N = d[0], H = d[2], W = d[3];
  const T* from = src.data<T>();
  T* to = dst.data<T>();
#pragma omp parallel for collapse(2) if (dst.numel() > (1 << 16))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const T* in = from + blocked_index(n, src_first + c, 0, 0, s[1], H, W, block);
      T* out = to + blocked_index(n, dst_first + c, 0, 0, d[1], H, W, block);
      for (int64_t p = 0; p < H * W; ++p) out[p * block] = in[p * block];
    }
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
  DTRAIN_CHECK(dst.numel() == src.numel() && dst.device() == Device::cpu &&
               src.device() == Device::cpu)
      << "reorder: " << src.shape().str() << " into " << dst.shape().str();
  if (dst_block == src_block && dst.dtype() == src.dtype()) return copy(dst, src);
  if (dst.dtype() != DType::f32 || src.dtype() != DType::f32) {
    if (!reorders_) reorders_ = std::make_shared<cpu::ReorderCache>();
    return reorders_->run(dst, dst_block, src, src_block);
  }
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
  DTRAIN_CHECK(dst.dtype() == src.dtype() &&
               (src.dtype() == DType::f32 || src.dtype() == DType::bf16))
      << "copy_channels: " << dtype_name(src.dtype()) << " into " << dtype_name(dst.dtype());
  if (src.dtype() == DType::bf16)
    return copy_channel_planes<cpu::bf16_t>(dst, dst_first, src, src_first, channels, block);
  copy_channel_planes<float>(dst, dst_first, src, src_first, channels, block);
}

}  // namespace dtrain
