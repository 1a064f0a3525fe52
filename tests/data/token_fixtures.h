// Fixtures of the language-model datasets: text files and llm.c token files written on the fly.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/dataset_table.h"  // dataset_defaults
#include "data/text.h"           // TextOptions
#include "data/token_file.h"     // kTokenFileMagic, kTokenFileVersion, TokenFileOptions

namespace dtrain::testing {

inline void write_text(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

// An llm.c token file: the 256-int32 header (`magic`, `version`, `count`), then `tokens` as
// uint16 (count may lie about them).
inline void write_token_file(const std::filesystem::path& file, const std::vector<uint16_t>& tokens,
                             int32_t magic = kTokenFileMagic, int32_t version = kTokenFileVersion,
                             int64_t count = -1) {
  std::filesystem::create_directories(file.parent_path());
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<int32_t>(count < 0 ? static_cast<int64_t>(tokens.size()) : count);
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(2 * tokens.size()));
}

// Tokens 0, 1, ..., n − 1 (mod 65536): a window's first input tells its position.
inline std::vector<uint16_t> counting_tokens(int64_t n, int64_t offset = 0) {
  std::vector<uint16_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<uint16_t>((i + offset) % 65536));
  return t;
}

inline DatasetConfig text_options(const std::string& path, int64_t block_size,
                                  const std::string& tokenizer = "byte",
                                  double valid_fraction = 0.1) {
  DatasetConfig o = dataset_defaults("text");
  o.path = path;
  auto& text = o.get<TextOptions>();
  text.block_size = static_cast<int>(block_size);
  text.tokenizer = tokenizer;
  text.valid_fraction = valid_fraction;
  return o;
}

inline DatasetConfig token_options(const std::string& dir, int64_t block_size,
                                   int64_t vocab_size = 50257) {
  DatasetConfig o = dataset_defaults("tokens");
  o.path = dir;
  auto& tokens = o.get<TokenFileOptions>();
  tokens.block_size = static_cast<int>(block_size);
  tokens.vocab_size = static_cast<int>(vocab_size);
  return o;
}

// One window of a dataset: its inputs (as ids) and labels.
struct Window {
  std::vector<int32_t> inputs, labels;
};

inline Window window_of(const Dataset& d, int64_t index, int64_t epoch = 0) {
  const int64_t t = d.sample_shape().numel();
  std::vector<float> x(static_cast<size_t>(t));
  Window w;
  w.labels.resize(static_cast<size_t>(d.label_shape().numel()));
  d.load_sample(index, x.data(), w.labels.data(), epoch);
  for (float v : x) w.inputs.push_back(static_cast<int32_t>(v));
  return w;
}

}  // namespace dtrain::testing
