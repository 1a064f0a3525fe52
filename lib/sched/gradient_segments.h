// GradientSegments: the trainable range of a flat gradient buffer cut into contiguous segments,
// each all-reduced as soon as backward reports it final (Model::backward's on_ready), last
// segment first — the overlap of communication with backward that DDP's buckets give and
// Pipe-SGD's Eq. 6 models. With one segment the whole range goes after backward.
#pragma once
#include <cstdint>
#include <future>
#include <vector>

#include "comm/gradient_allreducer.h"  // GradientAllreducer
#include "core/tensor.h"

namespace dtrain {

// Segments of about `target_bytes` for a range of `floats` (at least one): `segments: auto`.
int64_t segments_for_bytes(int64_t floats, double target_bytes);
inline constexpr double kAutoSegmentBytes = 25e6;  // as PyTorch DDP's default bucket
// The k + 1 bounds of [begin, end) in `segments` parts of equal size (±1; fewer when the range
// is smaller, at least one): the segments GradientSegments all-reduces, and how a sharded
// state is cut (shard/shard_layout.h).
std::vector<int64_t> segment_bounds(int64_t begin, int64_t end, int64_t segments);

class GradientSegments {
 public:
  // [begin, end) of the flat buffers in `segments` parts (fewer when the range is smaller).
  GradientSegments(int64_t begin, int64_t end, int64_t segments);

  size_t size() const { return bounds_.size() - 1; }
  int64_t begin() const { return bounds_.front(); }
  // size() + 1 increasing offsets: segment j is [bounds()[j], bounds()[j + 1]).
  const std::vector<int64_t>& bounds() const { return bounds_; }
  // Starts the segments of `buffer` in [offset, end) not started yet; their futures go to
  // `inflight`. `started` counts them within the iteration (reset it to 0 before backward).
  void start_ready(GradientAllreducer& allreducer, const Tensor& buffer, int64_t offset,
                   size_t& started, std::vector<std::future<void>>& inflight) const;

 private:
  std::vector<int64_t> bounds_;  // size() + 1 boundaries: segment_bounds
};

}  // namespace dtrain
