#include "sched/gradient_segments.h"

#include <algorithm>  // min, max
#include <cmath>      // ceil

namespace dtrain {

int64_t segments_for_bytes(int64_t floats, double target_bytes) {
  const double bytes = 4.0 * static_cast<double>(floats);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(bytes / target_bytes)));
}

std::vector<int64_t> segment_bounds(int64_t begin, int64_t end, int64_t segments) {
  const int64_t n = end - begin;
  segments = std::max<int64_t>(1, std::min<int64_t>(segments, n));
  std::vector<int64_t> bounds;
  for (int64_t j = 0; j <= segments; ++j) bounds.push_back(begin + n * j / segments);
  return bounds;
}

GradientSegments::GradientSegments(int64_t begin, int64_t end, int64_t segments)
    : bounds_(segment_bounds(begin, end, segments)) {}

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
