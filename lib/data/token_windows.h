// TokenWindows: one split of a token stream as a language model's samples. Sample i is the
// window of tokens [i·B, i·B + B + 1) (B = block_size): its input is the first B ids (as f32,
// exact below 2^24), its labels the next B ids (i32), so each token of the split is predicted
// once per epoch. The text and token-file datasets and their stand-ins differ only in where the
// tokens come from (read()).
#pragma once
#include <cstdint>  // int64_t, int32_t
#include <memory>   // shared_ptr: what keeps the tokens alive
#include <string>
#include <string_view>

#include "config/schema.h"  // Schema: the block_size key the token datasets share
#include "data/dataset.h"   // Dataset, Split

namespace dtrain {

// Windows of `block_size` inputs a split of `tokens` tokens holds: ⌊(tokens − 1) / block_size⌋
// (0 when tokens ≤ block_size).
int64_t window_count(int64_t tokens, int64_t block_size);

// InputError unless a split of `tokens` tokens from `source` holds one window; `how` says how
// the split was cut (for the message: "the last 10 % of its 1200 tokens").
void check_one_window(int64_t tokens, int64_t block_size, Split split, std::string_view source,
                      std::string_view how);

// InputError naming dataset.block_size unless it is > 0 (required for dataset `name`).
void check_block_size(int64_t block_size, std::string_view name);

// A token dataset's schema, starting with the key every token dataset has: block_size, the
// tokens of one sample (required).
template <class Options>
config::Schema<Options> token_dataset_schema(std::string noun, int Options::*block_size) {
  using namespace config;
  return Schema<Options>(std::move(noun))
      .key("block_size", block_size, integer(Bounds::above(0)),
           "tokens per sample: the model's context; a sample's labels are the next tokens")
      .required("the tokens per sample, e.g. 256");
}
// Why block_size belongs to the token datasets (said when another dataset is given it).
inline constexpr const char* kBlockSizeIsTokens = "image datasets define their shape";

class TokenWindows : public Dataset {
 public:
  // `windows` ≤ window_count(tokens of the split, block_size); `describe` the one-line summary.
  TokenWindows(int64_t windows, int64_t block_size, int64_t vocab, std::string description)
      : windows_(windows),
        block_(block_size),
        vocab_(vocab),
        description_(std::move(description)) {}

  int64_t size() const override { return windows_; }
  Shape sample_shape() const override { return Shape{block_}; }
  Shape label_shape() const override { return Shape{block_}; }
  int64_t num_classes() const override { return vocab_; }
  // The window's inputs; returns its last label (the one-label interface; the Loader calls
  // load_sample).
  int32_t load(int64_t index, float* out, int64_t epoch) const override;
  void load_sample(int64_t index, float* out, int32_t* labels, int64_t epoch) const override;
  std::string describe() const override { return description_; }

 protected:
  // Thread-safe. Writes the split's tokens [first, first + count) into `ids`.
  virtual void read(int64_t first, int64_t count, int32_t* ids) const = 0;

 private:
  int64_t windows_, block_, vocab_;
  std::string description_;
};

}  // namespace dtrain

namespace dtrain {

// Windows over tokens held in memory (a file read whole, or mapped): `tokens` is the split's
// first token and stays valid while `keep` lives.
template <class Token>
class TokenArrayWindows final : public TokenWindows {
 public:
  TokenArrayWindows(const Token* tokens, int64_t windows, int64_t block_size, int64_t vocab,
                    std::string description, std::shared_ptr<const void> keep,
                    std::string vocabulary = {})
      : TokenWindows(windows, block_size, vocab, std::move(description)),
        tokens_(tokens),
        keep_(std::move(keep)),
        vocabulary_(std::move(vocabulary)) {}
  std::string vocabulary_json() const override { return vocabulary_; }

 protected:
  void read(int64_t first, int64_t count, int32_t* ids) const override {
    const Token* from = tokens_ + first;
    for (int64_t i = 0; i < count; ++i) ids[i] = static_cast<int32_t>(from[i]);
  }

 private:
  const Token* tokens_;
  std::shared_ptr<const void> keep_;
  std::string vocabulary_;
};

}  // namespace dtrain
