#include "nn/memory_plan.h"

#include <algorithm>  // sort, max
#include <numeric>    // iota

#include "core/error.h"

namespace dtrain {

ArenaPlan plan_arena(std::span<const BufferLifetime> buffers, int64_t alignment) {
  DTRAIN_CHECK(alignment > 0) << "plan_arena: alignment must be positive";
  const size_t n = buffers.size();
  auto aligned = [&](int64_t v) { return (v + alignment - 1) / alignment * alignment; };
  ArenaPlan plan;
  plan.offsets.assign(n, 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by birth so that the plan does not depend on the sort's stability.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size) return buffers[a].size > buffers[b].size;
    return a < b;
  });
  // Whether two buffers are alive at a common step (each span against each span).
  auto overlap = [](const BufferLifetime& a, const BufferLifetime& b) {
    auto meet = [](int f1, int l1, int f2, int l2) {
      return f1 <= l2 && f2 <= l1 && f1 <= l1 && f2 <= l2;
    };
    return meet(a.first, a.last, b.first, b.last) ||
           meet(a.first, a.last, b.again_first, b.again_last) ||
           meet(a.again_first, a.again_last, b.first, b.last) ||
           meet(a.again_first, a.again_last, b.again_first, b.again_last);
  };
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> taken;  // [begin, end) of overlapping buffers
  for (size_t b : order) {
    const BufferLifetime& buf = buffers[b];
    DTRAIN_CHECK(buf.size >= 0 && buf.first <= buf.last) << "plan_arena: bad buffer " << b;
    const int64_t size = aligned(buf.size);
    plan.unshared += size;
    taken.clear();
    for (size_t p : placed) {
      const BufferLifetime& other = buffers[p];
      if (overlap(other, buf))
        taken.emplace_back(plan.offsets[p], plan.offsets[p] + aligned(other.size));
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + size <= begin) break;  // the gap before this one fits
      offset = std::max(offset, end);
    }
    plan.offsets[b] = offset;
    plan.size = std::max(plan.size, offset + size);
    placed.push_back(b);
  }
  return plan;
}

}  // namespace dtrain
