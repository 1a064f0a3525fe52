#include "data/normalize.h"

#include "core/error.h"  // DTRAIN_INPUT_CHECK

namespace dtrain {

Normalization Normalization::identity(int64_t channels) {
  return {std::vector<float>(channels, 0.0f), std::vector<float>(channels, 1.0f)};
}

Normalization resolve_normalization(const DatasetConfig& config, int64_t channels,
                                    const Normalization& standard) {
  Normalization norm = standard;
  if (!config.mean.empty()) {
    DTRAIN_INPUT_CHECK(static_cast<int64_t>(config.mean.size()) == channels)
        << "dataset.mean: expected " << channels << " value(s), one per channel, got "
        << config.mean.size();
    norm.mean.assign(config.mean.begin(), config.mean.end());
  }
  if (!config.std.empty()) {
    DTRAIN_INPUT_CHECK(static_cast<int64_t>(config.std.size()) == channels)
        << "dataset.std: expected " << channels << " value(s), one per channel, got "
        << config.std.size();
    norm.std.assign(config.std.begin(), config.std.end());
    for (float s : norm.std) DTRAIN_INPUT_CHECK(s > 0.0f) << "dataset.std: " << s << " is not > 0";
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
