// The layout operations every backend has: plain NCHW only. Backends with blocked layouts (the
// CPU) override them.
#include "backend/backend.h"
#include "core/error.h"

namespace dtrain {

// Not a layout operation, but a default kept with the others: two passes where a backend's own
// kernel makes one.
void Backend::add_relu(const Tensor& a, const Tensor& b, const Tensor& out) {
  add(a, b, out);
  make_relu(Shape{out.numel()})->forward(out, out);
}

void Backend::reorder(const Tensor& dst, ChannelBlock dst_block, const Tensor& src,
                      ChannelBlock src_block) {
  DTRAIN_CHECK(dst_block == 1 && src_block == 1)
      << name() << ": no blocked layouts (reorder " << src_block << " → " << dst_block << ")";
  copy(dst, src);
}

void Backend::copy_channels(const Tensor& dst, int64_t dst_first, const Tensor& src,
                            int64_t src_first, int64_t channels, ChannelBlock block) {
  DTRAIN_CHECK(block == 1) << name() << ": no blocked layouts (copy_channels)";
  const Shape& d = dst.shape();
  const Shape& s = src.shape();
  DTRAIN_CHECK(d.rank() == 4 && s.rank() == 4 && d[0] == s[0] && d[2] == s[2] && d[3] == s[3] &&
               dst_first + channels <= d[1] && src_first + channels <= s[1])
      << "copy_channels: " << channels << " channels from " << s.str() << " to " << d.str();
  const int64_t plane = d[2] * d[3];
  copy_rows(dst.slice(dst_first * plane, {dst.numel() - dst_first * plane}), d[1] * plane,
            src.slice(src_first * plane, {src.numel() - src_first * plane}), s[1] * plane, d[0],
            channels * plane);
}

}  // namespace dtrain
