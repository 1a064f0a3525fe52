#include "data/normalize.h"

#include "core/error.h"  // DTRAIN_INPUT_CHECK

namespace dtrain {

Normalization Normalization::identity(int64_t channels) {
  return {std::vector<float>(channels, 0.0f), std::vector<float>(channels, 1.0f)};
}

Normalization resolve_normalization(const DatasetOptions& options, int64_t channels,
                                    const Normalization& standard) {
  Normalization norm = standard;
  if (!options.mean.empty()) {
    DTRAIN_INPUT_CHECK(static_cast<int64_t>(options.mean.size()) == channels)
        << "dataset.mean: expected " << channels << " value(s), one per channel, got "
        << options.mean.size();
    norm.mean = options.mean;
  }
  if (!options.std.empty()) {
    DTRAIN_INPUT_CHECK(static_cast<int64_t>(options.std.size()) == channels)
        << "dataset.std: expected " << channels << " value(s), one per channel, got "
        << options.std.size();
    for (float s : options.std)
      DTRAIN_INPUT_CHECK(s > 0.0f) << "dataset.std: " << s << " is not > 0";
    norm.std = options.std;
  }
  return norm;
}

ByteLut::ByteLut(const Normalization& norm) : table_(norm.mean.size() * 256) {
  for (size_t c = 0; c < norm.mean.size(); ++c) {
    for (int v = 0; v < 256; ++v) {
      table_[c * 256 + v] = (static_cast<float>(v) / 255.0f - norm.mean[c]) / norm.std[c];
    }
  }
}

}  // namespace dtrain
