// Token files (dataset `tokens`): DIR/train.bin and DIR/val.bin as llm.c writes them (and
// nanoGPT-style GPT-2 token data converted to that format): a header of 256 little-endian int32
// (magic 20240520, version 1, the token count), then that many uint16 token ids. The files are
// memory-mapped, each split cut into windows of block_size + 1 tokens (token_windows.h).
#pragma once
#include <cstdint>  // int32_t, int64_t
#include <memory>   // unique_ptr
#include <string>

#include "data/dataset.h"  // Split

namespace dtrain {

constexpr int32_t kTokenFileMagic = 20240520;
constexpr int32_t kTokenFileVersion = 1;  // uint16 ids (llm.c's GPT-2 data)
constexpr int64_t kTokenFileHeaderInts = 256;

// The token files' own keys. Opening them is an InputError naming the file for a missing file,
// a wrong magic number or version, a size other than the header's count promises, and the
// first token id ≥ vocab_size.
struct TokenFileOptions {
  int block_size = 0;      // tokens per sample (the model's context); 0 is refused (required)
  int vocab_size = 50257;  // ids are < vocab_size (GPT-2's 50257)
};

// The file of `split` in `dir`: train.bin or val.bin.
std::string token_file_of(const std::string& dir, Split split);

}  // namespace dtrain
