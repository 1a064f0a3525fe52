#include "sched/gradient_segments.h"

#include <algorithm>  // min, max
#include <cmath>      // ceil

namespace dtrain {

int64_t segments_for_bytes(int64_t floats, double target_bytes) {
  const double bytes = 4.0 * static_cast<double>(floats);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(bytes / target_bytes)));
}

GradientSegments::GradientSegments(int64_t begin, int64_t end, int64_t segments) {
  const int64_t n = end - begin;
  segments = std::max<int64_t>(1, std::min<int64_t>(segments, n));
  for (int64_t j = 0; j <= segments; ++j) bounds_.push_back(begin + n * j / segments);
}

GradientSegments::GradientSegments(int64_t begin, int64_t end, int64_t segments,
                                   const std::vector<int64_t>& cuts)
    : GradientSegments(begin, end, segments) {
  std::vector<int64_t> inner;  // the cuts strictly inside the range, increasing
  for (int64_t c : cuts)
    if (c > begin && c < end) inner.push_back(c);
  std::sort(inner.begin(), inner.end());
  std::vector<int64_t> snapped{begin};
  for (size_t j = 1; j + 1 < bounds_.size(); ++j) {
    if (inner.empty()) break;
    const auto above = std::lower_bound(inner.begin(), inner.end(), bounds_[j]);
    int64_t nearest = above == inner.end() ? inner.back() : *above;
    if (above != inner.begin() &&
        (above == inner.end() || bounds_[j] - *(above - 1) < *above - bounds_[j]))
      nearest = *(above - 1);
    if (nearest > snapped.back()) snapped.push_back(nearest);
  }
  snapped.push_back(end);
  bounds_ = std::move(snapped);
}

void GradientSegments::start_ready(GradientAllreducer& allreducer, const Tensor& buffer,
                                   int64_t offset, size_t& started,
                                   std::vector<std::future<void>>& inflight) const {
  const size_t count = size();
  // Backward finishes the buffer from its end: segments start last to first.
  while (started < count) {
    const size_t j = count - 1 - started;
    if (bounds_[j] < offset) break;
    inflight.push_back(allreducer.start(buffer.slice(bounds_[j], {bounds_[j + 1] - bounds_[j]})));
    ++started;
  }
}

}  // namespace dtrain
