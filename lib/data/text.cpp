#include "data/text.h"

#include <iconv.h>  // UTF-8 → UTF-32 with the offset of an invalid sequence

#include <algorithm>  // max_element
#include <bit>        // endian: the UTF-32 byte order of char32_t
#include <cerrno>     // EILSEQ, EINVAL: why iconv stopped
#include <cstdio>     // snprintf: \u escapes
#include <filesystem>
#include <sstream>  // the split's percentage as written

#include "core/error.h"          // DTRAIN_INPUT_CHECK, DTRAIN_CHECK
#include "data/byte_file.h"      // read_whole_file
#include "data/dataset_table.h"  // DatasetEntry: its row
#include "data/describe.h"       // describe_dataset
#include "data/stand_in.h"       // stand_in_tokens
#include "data/subset.h"         // requested_samples
#include "data/token_windows.h"  // TokenArrayWindows, window_count, token_dataset_schema

namespace dtrain {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kByteVocab = 256;

// The file's code points; InputError at the first invalid or incomplete sequence.
std::vector<char32_t> decode_utf8(const std::vector<uint8_t>& bytes, const std::string& file) {
  constexpr const char* kUtf32 =
      std::endian::native == std::endian::little ? "UTF-32LE" : "UTF-32BE";
  iconv_t cd = iconv_open(kUtf32, "UTF-8");
  DTRAIN_CHECK(cd != reinterpret_cast<iconv_t>(-1)) << "iconv cannot convert UTF-8 to UTF-32";
  std::vector<char32_t> points(bytes.size());  // at most one code point a byte
  char* in = const_cast<char*>(reinterpret_cast<const char*>(bytes.data()));
  size_t in_left = bytes.size();
  char* out = reinterpret_cast<char*>(points.data());
  size_t out_left = points.size() * sizeof(char32_t);
  const size_t result = iconv(cd, &in, &in_left, &out, &out_left);
  const int why = errno;
  iconv_close(cd);
  if (result == static_cast<size_t>(-1)) {
    const auto offset = reinterpret_cast<const uint8_t*>(in) - bytes.data();
    DTRAIN_INPUT_CHECK(false) << file << ": not UTF-8 at byte offset " << offset << " ("
                              << (why == EINVAL ? "a sequence cut off by the end of the file"
                                                : "an invalid byte sequence")
                              << "): the char tokenizer reads UTF-8 text; tokenizer: byte reads "
                              << "any file";
  }
  points.resize(points.size() - out_left / sizeof(char32_t));
  return points;
}

// A code point as UTF-8 inside a JSON string.
void append_json_char(std::string& s, char32_t c) {
  if (c == U'"' || c == U'\\') {
    s += '\\';
    s += static_cast<char>(c);
  } else if (c == U'\n') {
    s += "\\n";
  } else if (c == U'\t') {
    s += "\\t";
  } else if (c == U'\r') {
    s += "\\r";
  } else if (c < 0x20 || c == 0x7f) {
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
    s += escaped;
  } else if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xc0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xe0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (c & 0x3f));
  }
}

}  // namespace

int64_t training_tokens(int64_t n, double valid_fraction) {
  return static_cast<int64_t>(static_cast<double>(n) * (1.0 - valid_fraction));
}

void check_valid_fraction(double valid_fraction) {
  DTRAIN_INPUT_CHECK(valid_fraction > 0 && valid_fraction < 1)
      << "dataset.valid_fraction: " << valid_fraction
      << " is outside (0, 1) (the file's last tokens that are the test split)";
}

TextTokens tokenize_text(const std::string& file, const std::string& tokenizer) {
  DTRAIN_INPUT_CHECK(tokenizer == "byte" || tokenizer == "char")
      << "dataset.tokenizer: unknown tokenizer '" << tokenizer << "' (expected byte | char)";
  std::error_code ec;
  DTRAIN_INPUT_CHECK(!file.empty()) << "dataset.path: required for text (the text file)";
  DTRAIN_INPUT_CHECK(fs::exists(file, ec))
      << "dataset.path: " << file << " does not exist (scripts/setup.sh writes the King James "
      << "Bible to datasets/kjv/kjv.txt; datasets/README.md)";
  DTRAIN_INPUT_CHECK(!fs::is_directory(file, ec))
      << "dataset.path: " << file << " is a folder; the text dataset reads one text file";
  std::vector<uint8_t> bytes = read_whole_file(file);
  DTRAIN_INPUT_CHECK(!bytes.empty()) << file << ": the text file is empty";
  TextTokens t;
  if (tokenizer == "byte") {
    t.ids.assign(bytes.begin(), bytes.end());
    t.vocab = kByteVocab;
    return t;
  }
  const std::vector<char32_t> points = decode_utf8(bytes, file);
  // The distinct code points in order: marked in a table indexed by code point (one pass,
  // where sorting the file's millions of points took longer than reading them).
  const char32_t top = *std::max_element(points.begin(), points.end());
  std::vector<int32_t> id_of(static_cast<size_t>(top) + 1, -1);
  for (const char32_t c : points) id_of[c] = 0;
  for (size_t c = 0; c < id_of.size(); ++c) {
    if (id_of[c] < 0) continue;
    id_of[c] = static_cast<int32_t>(t.chars.size());
    t.chars.push_back(static_cast<char32_t>(c));
  }
  t.vocab = static_cast<int64_t>(t.chars.size());
  t.ids.resize(points.size());
  for (size_t i = 0; i < points.size(); ++i) t.ids[i] = id_of[points[i]];
  return t;
}

std::string vocabulary_json(const std::vector<char32_t>& chars) {
  std::string s = "[\n";
  for (size_t i = 0; i < chars.size(); ++i) {
    s += '"';
    append_json_char(s, chars[i]);
    s += i + 1 < chars.size() ? "\",\n" : "\"\n";
  }
  return s + "]\n";
}

namespace {

// The file read whole, tokenized, cut into the training and the test split.
std::unique_ptr<Dataset> open_text(const DatasetConfig& config, const TextOptions& options,
                                   Split split, uint64_t) {
  check_block_size(options.block_size, config.name);
  check_valid_fraction(options.valid_fraction);
  auto text = std::make_shared<TextTokens>(tokenize_text(config.path, options.tokenizer));
  const int64_t n = static_cast<int64_t>(text->ids.size());
  const int64_t train = training_tokens(n, options.valid_fraction);
  const bool training = split == Split::train;
  const int64_t first = training ? 0 : train, tokens = training ? train : n - train;
  std::ostringstream how;
  how << (training ? "the first " : "the last ")
      << 100 * (training ? 1 - options.valid_fraction : options.valid_fraction) << " % of its " << n
      << " " << options.tokenizer << " tokens";
  check_one_window(tokens, options.block_size, split, config.path, how.str());
  const int64_t windows = requested_samples(
      config, split, window_count(tokens, options.block_size),
      config.path + " (windows of dataset.block_size " + std::to_string(options.block_size) + ")");
  std::string source = config.path + ": " + options.tokenizer + " tokens " + std::to_string(first) +
                       "–" + std::to_string(first + tokens) + " of " + std::to_string(n);
  std::string description =
      describe_dataset(config.name, split, windows, Shape{options.block_size}, text->vocab, source);
  std::string vocabulary = text->chars.empty() ? std::string() : vocabulary_json(text->chars);
  const int32_t* start = text->ids.data() + first;
  return std::make_unique<TokenArrayWindows<int32_t>>(start, windows, options.block_size,
                                                      text->vocab, std::move(description),
                                                      std::move(text), std::move(vocabulary));
}

// The King James Bible as scripts/setup.sh writes it (ASCII: as many chars as bytes): what the
// stand-in is sized as.
constexpr int64_t kBibleTokens = 4137850;

std::unique_ptr<Dataset> text_stand_in(const DatasetConfig& config, const TextOptions& options,
                                       Split split, uint64_t seed) {
  check_block_size(options.block_size, config.name);
  check_valid_fraction(options.valid_fraction);
  const int64_t train = training_tokens(kBibleTokens, options.valid_fraction);
  const int64_t tokens = split == Split::train ? train : kBibleTokens - train;
  const std::string what =
      std::string("sized as the King James Bible, ") +
      (options.tokenizer == "char"
           ? "256 ids: a guess, the char tokenizer's vocabulary comes from the file"
           : "256 byte ids");
  return stand_in_tokens(config, split, seed, options.block_size, tokens, kByteVocab, "file", what);
}

config::Schema<TextOptions> text_schema() {
  using namespace config;
  return token_dataset_schema<TextOptions>("text", &TextOptions::block_size)
      .key("tokenizer", &TextOptions::tokenizer, choice({"byte", "char"}),
           "byte: 256 ids, the file's bytes; char: the file's distinct characters (UTF-8), "
           "sorted (written to OUT/vocab.json)")
      .key("valid_fraction", &TextOptions::valid_fraction, real(Bounds{0, 1, true, true}),
           "the file's last tokens that are the test split (the first ones train)");
}

}  // namespace

DatasetEntry text_dataset() {
  return {
      .name = "text",
      .summary =
          "a text file read whole as a language model's tokens (bytes or characters), "
          "its last valid_fraction the test split",
      .keys = config::erase(text_schema()),
      .open = opener_of<TextOptions>(open_text),
      .stand_in = opener_of<TextOptions>(text_stand_in),
      .on_disk = OnDisk::file("the text file",
                              "the text file `dataset.path` itself (e.g. `datasets/kjv/kjv.txt`)"),
      .channels = [](const DatasetConfig&) { return 0; },
      .offers =
          "windows of block_size token ids; vocabulary 256 (byte) or the file's "
          "characters (char, written to OUT/vocab.json)",
      .sample_is = "windows",
      .keys_after = "augment",  // which it has not: after every key of the image files
      .own_key_reasons = {{"block_size", kBlockSizeIsTokens},
                          {"tokenizer", "token files hold ids already"},
                          {"valid_fraction", "token files come as train.bin and val.bin"}},
  };
}

}  // namespace dtrain
