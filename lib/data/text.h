// A text file as a language model's data (dataset `text`): tokenized by bytes or by characters,
// the first 1 − valid_fraction of its tokens the training split and the rest the test split (as
// nanoGPT's prepare scripts cut them), each cut into windows of block_size + 1 tokens
// (token_windows.h).
#pragma once
#include <cstdint>  // int32_t, int64_t
#include <memory>   // unique_ptr
#include <string>
#include <vector>

namespace dtrain {

// The text dataset's own keys.
struct TextOptions {
  int block_size = 0;  // tokens per sample (the model's context); 0 is refused (required)
  // byte (ids = the file's bytes, 256) | char (ids = the file's distinct Unicode code points,
  // sorted; the file must be UTF-8).
  std::string tokenizer = "byte";
  double valid_fraction = 0.1;  // the file's last tokens that are the test split
};

// A text file's tokens.
struct TextTokens {
  std::vector<int32_t> ids;
  int64_t vocab = 0;            // byte: 256; char: chars.size()
  std::vector<char32_t> chars;  // char: the code point of each id, ascending; byte: empty
};

// InputError for a missing, unreadable or empty file, an unknown tokenizer, and (char) a file
// that is not UTF-8, naming the file and the byte offset of the first invalid sequence.
TextTokens tokenize_text(const std::string& file, const std::string& tokenizer);

// vocab.json of a char vocabulary: a JSON array of the characters in id order, one a line.
std::string vocabulary_json(const std::vector<char32_t>& chars);

// The training split's tokens of `n`: ⌊n · (1 − valid_fraction)⌋, nanoGPT's int(n * 0.9).
int64_t training_tokens(int64_t n, double valid_fraction);

// InputError naming dataset.valid_fraction unless it is in (0, 1).
void check_valid_fraction(double valid_fraction);

}  // namespace dtrain
