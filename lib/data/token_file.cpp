#include "data/token_file.h"

#include <fcntl.h>     // open
#include <sys/mman.h>  // mmap: a file of billions of tokens is read only where windows are
#include <sys/stat.h>  // fstat
#include <unistd.h>    // close

#include <algorithm>  // max
#include <bit>        // endian: the files are little-endian
#include <cerrno>
#include <cstring>  // memcpy, strerror
#include <filesystem>

#include "core/error.h"          // DTRAIN_INPUT_CHECK
#include "data/dataset_table.h"  // DatasetEntry: its row
#include "data/describe.h"       // describe_dataset
#include "data/stand_in.h"       // stand_in_tokens
#include "data/subset.h"         // requested_samples
#include "data/token_windows.h"  // TokenArrayWindows, window_count, token_dataset_schema

namespace dtrain {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kHeaderBytes = kTokenFileHeaderInts * 4;

// A whole file mapped read-only; unmapped with the last window dataset that reads it.
class MappedFile {
 public:
  explicit MappedFile(const std::string& file) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    DTRAIN_INPUT_CHECK(fd >= 0) << file << ": cannot open (" << std::strerror(errno) << ")";
    struct stat st {};
    if (::fstat(fd, &st) == 0) size_ = static_cast<int64_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_PRIVATE, fd, 0);
      data_ = p == MAP_FAILED ? nullptr : static_cast<const uint8_t*>(p);
    }
    const int why = errno;
    ::close(fd);
    DTRAIN_INPUT_CHECK(size_ == 0 || data_ != nullptr)
        << file << ": cannot map (" << std::strerror(why) << ")";
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
};

int32_t little_endian32(const uint8_t* p) {
  return static_cast<int32_t>(uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) |
                              (uint32_t{p[3]} << 24));
}

// Checks the header and the size; returns the token count.
int64_t check_header(const MappedFile& f, const std::string& file) {
  DTRAIN_INPUT_CHECK(f.size() >= kHeaderBytes)
      << file << ": truncated: expected at least " << kHeaderBytes << " bytes (the header of "
      << kTokenFileHeaderInts << " int32), got " << f.size();
  const int32_t magic = little_endian32(f.data());
  DTRAIN_INPUT_CHECK(magic == kTokenFileMagic)
      << file << ": wrong magic number " << magic << ", expected " << kTokenFileMagic
      << " (llm.c's token file: a header of " << kTokenFileHeaderInts
      << " int32, then uint16 ids; nanoGPT's headerless .bin files need that header)";
  const int32_t version = little_endian32(f.data() + 4);
  DTRAIN_INPUT_CHECK(version == kTokenFileVersion)
      << file << ": version " << version << ", expected " << kTokenFileVersion
      << " (uint16 token ids)";
  const int64_t count = little_endian32(f.data() + 8);
  DTRAIN_INPUT_CHECK(count >= 0) << file << ": the header's token count " << count
                                 << " is negative";
  const int64_t expected = kHeaderBytes + 2 * count;
  DTRAIN_INPUT_CHECK(f.size() >= expected)
      << file << ": truncated: expected " << expected << " bytes (the header and " << count
      << " uint16 tokens, as its header says), got " << f.size();
  DTRAIN_INPUT_CHECK(f.size() == expected)
      << file << ": expected " << expected << " bytes (the header and " << count
      << " uint16 tokens, as its header says), got " << f.size() << " (trailing data)";
  return count;
}

// InputError at the first token id ≥ vocab. One pass for the maximum (vectorised), a second
// only to find where a bad id is.
void check_ids(const uint16_t* ids, int64_t count, int64_t vocab, const std::string& file) {
  if (count == 0) return;
  uint16_t largest = 0;
  for (int64_t i = 0; i < count; ++i) largest = std::max(largest, ids[i]);
  if (largest < vocab) return;
  int64_t at = 0;
  while (ids[at] < vocab) ++at;
  DTRAIN_INPUT_CHECK(false) << file << ": token " << at << " (byte offset " << kHeaderBytes + 2 * at
                            << ") is id " << ids[at] << ", not below dataset.vocab_size " << vocab;
}

std::unique_ptr<Dataset> open_token_files(const DatasetConfig& config,
                                          const TokenFileOptions& options, Split split, uint64_t) {
  check_block_size(options.block_size, config.name);
  DTRAIN_INPUT_CHECK(options.vocab_size >= 2 && options.vocab_size <= 65536)
      << "dataset.vocab_size: " << options.vocab_size
      << " is outside [2, 65536] (the ids are uint16)";
  const std::string file = token_file_of(config.path, split);
  std::error_code ec;
  DTRAIN_INPUT_CHECK(fs::is_regular_file(file, ec))
      << "dataset.path: " << config.path << " holds no " << fs::path(file).filename().string()
      << " (expected train.bin and val.bin, llm.c's token files; datasets/README.md)";
  auto mapped = std::make_shared<MappedFile>(file);
  const int64_t count = check_header(*mapped, file);
  static_assert(std::endian::native == std::endian::little, "token files are little-endian");
  // The ids follow the 1024-byte header: aligned for uint16 in the page-aligned mapping.
  const auto* ids = reinterpret_cast<const uint16_t*>(mapped->data() + kHeaderBytes);
  check_ids(ids, count, options.vocab_size, file);
  check_one_window(count, options.block_size, split, file, "the whole file");
  const int64_t windows = requested_samples(
      config, split, window_count(count, options.block_size),
      file + " (windows of dataset.block_size " + std::to_string(options.block_size) + ")");
  std::string description =
      describe_dataset(config.name, split, windows, Shape{options.block_size}, options.vocab_size,
                       file + ": " + std::to_string(count) + " tokens");
  return std::make_unique<TokenArrayWindows<uint16_t>>(ids, windows, options.block_size,
                                                       options.vocab_size, std::move(description),
                                                       std::move(mapped));
}

// nanoGPT's OpenWebText in GPT-2 tokens: what the stand-in is sized as.
constexpr int64_t kOpenWebTextTrain = 9035582198, kOpenWebTextVal = 4434897;

std::unique_ptr<Dataset> token_files_stand_in(const DatasetConfig& config,
                                              const TokenFileOptions& options, Split split,
                                              uint64_t seed) {
  check_block_size(options.block_size, config.name);
  const int64_t tokens = split == Split::train ? kOpenWebTextTrain : kOpenWebTextVal;
  return stand_in_tokens(config, split, seed, options.block_size, tokens, options.vocab_size,
                         "files",
                         "sized as OpenWebText, " + std::to_string(options.vocab_size) + " ids");
}

config::Schema<TokenFileOptions> token_files_schema() {
  using namespace config;
  return token_dataset_schema<TokenFileOptions>("tokens", &TokenFileOptions::block_size)
      .key("vocab_size", &TokenFileOptions::vocab_size, integer(Bounds{2, 65536}),
           "the ids' vocabulary: every id in train.bin and val.bin is below it (GPT-2: 50257)");
}

}  // namespace

std::string token_file_of(const std::string& dir, Split split) {
  return (fs::path(dir) / (split == Split::train ? "train.bin" : "val.bin")).string();
}

DatasetEntry tokens_dataset() {
  return {
      .name = "tokens",
      .summary =
          "llm.c's token files (train.bin, val.bin: a header, then uint16 ids; GPT-2's "
          "tokens), memory-mapped",
      .keys = config::erase(token_files_schema()),
      .open = opener_of<TokenFileOptions>(open_token_files),
      .stand_in = opener_of<TokenFileOptions>(token_files_stand_in),
      .on_disk = OnDisk::folder("`train.bin`, `val.bin` (llm.c's token files)"),
      .channels = [](const DatasetConfig&) { return 0; },
      .offers = "windows of block_size token ids; vocabulary vocab_size",
      .sample_is = "windows",
      .keys_after = "augment",  // which it has not: after every key of the image files
      .own_key_reasons = {{"block_size", kBlockSizeIsTokens},
                          {"vocab_size", "the text tokenizer defines the vocabulary"}},
  };
}

}  // namespace dtrain
