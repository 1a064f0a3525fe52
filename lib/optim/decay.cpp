#include "optim/decay.h"

#include <algorithm>  // sort

#include "core/error.h"

namespace dtrain {

std::vector<DecayRange> cover(std::vector<DecayRange> ranges, int64_t size) {
  std::sort(ranges.begin(), ranges.end(),
            [](const DecayRange& a, const DecayRange& b) { return a.offset < b.offset; });
  std::vector<DecayRange> runs;
  auto append = [&runs](int64_t offset, int64_t count, bool decay) {
    if (count <= 0) return;
    if (!runs.empty() && runs.back().decay == decay &&
        runs.back().offset + runs.back().count == offset)
      runs.back().count += count;
    else
      runs.push_back({offset, count, decay});
  };
  int64_t at = 0;
  for (const DecayRange& r : ranges) {
    if (r.count == 0 || (r.offset + r.count <= at && r.offset < at)) continue;  // a tied weight's
    DTRAIN_CHECK(r.offset >= at && r.count >= 0 && r.offset + r.count <= size)
        << "decay range [" << r.offset << ", " << r.offset + r.count
        << ") overlaps another or lies outside the " << size << " parameters";
    append(at, r.offset - at, true);
    append(r.offset, r.count, r.decay);
    at = r.offset + r.count;
  }
  append(at, size - at, true);
  return runs;
}

}  // namespace dtrain
