// dataset.train_size / dataset.test_size for file-backed datasets: 0 = the whole split,
// N = the first N samples (a quick run on a slice of a real dataset).
#pragma once
#include <cstdint>  // int64_t
#include <string_view>

#include "core/error.h"    // DTRAIN_INPUT_CHECK
#include "data/dataset.h"  // DatasetConfig, Split

namespace dtrain {

inline int64_t requested_samples(const DatasetConfig& config, Split split, int64_t available,
                                 std::string_view source) {
  const char* key = split == Split::train ? "dataset.train_size" : "dataset.test_size";
  int64_t n = split == Split::train ? config.train_size : config.test_size;
  DTRAIN_INPUT_CHECK(n >= 0) << key << ": " << n << " is negative";
  DTRAIN_INPUT_CHECK(n <= available)
      << key << ": " << n << " exceeds the " << available << " samples of " << source;
  return n == 0 ? available : n;
}

}  // namespace dtrain
