#include "data/token_windows.h"

#include <vector>

#include "core/error.h"  // DTRAIN_CHECK, DTRAIN_INPUT_CHECK

namespace dtrain {

int64_t window_count(int64_t tokens, int64_t block_size) {
  return tokens > block_size ? (tokens - 1) / block_size : 0;
}

void check_one_window(int64_t tokens, int64_t block_size, Split split, std::string_view source,
                      std::string_view how) {
  DTRAIN_INPUT_CHECK(window_count(tokens, block_size) >= 1)
      << source << ": the " << (split == Split::train ? "training" : "validation") << " split ("
      << how << ") holds " << tokens << " token(s), fewer than one window of dataset.block_size "
      << block_size << " + 1 (the inputs and the next token): use a smaller block_size or "
      << "more text";
}

void check_block_size(int64_t block_size, std::string_view name) {
  DTRAIN_INPUT_CHECK(block_size > 0)
      << "dataset.block_size: " << block_size << " is not > 0 (required for " << name
      << ": the tokens of one sample)";
}

void TokenWindows::load_sample(int64_t index, float* out, int32_t* labels, int64_t) const {
  DTRAIN_CHECK(index >= 0 && index < windows_) << "window " << index << " of " << windows_;
  const int64_t first = index * block_;
  read(first + 1, block_, labels);  // the labels are the inputs shifted by one
  int32_t head = 0;
  read(first, 1, &head);
  out[0] = static_cast<float>(head);
  for (int64_t t = 1; t < block_; ++t) out[t] = static_cast<float>(labels[t - 1]);
}

int32_t TokenWindows::load(int64_t index, float* out, int64_t epoch) const {
  std::vector<int32_t> labels(static_cast<size_t>(block_));
  load_sample(index, out, labels.data(), epoch);
  return labels.back();
}

}  // namespace dtrain
