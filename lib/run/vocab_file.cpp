#include "run/vocab_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"  // DTRAIN_CHECK: a failed write

namespace dtrain {

namespace {

// The file's lines: vocab.json holds one entry a line between "[" and "]".
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The entry's text without the separating comma, as written.
std::string entry(const std::string& line) {
  return !line.empty() && line.back() == ',' ? line.substr(0, line.size() - 1) : line;
}

}  // namespace

void write_vocabulary_file(const std::string& dir, const std::string& vocabulary) {
  if (vocabulary.empty()) return;
  const std::string file = (std::filesystem::path(dir) / kVocabularyFile).string();
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << vocabulary;
  DTRAIN_CHECK(out.good()) << file << ": cannot write the vocabulary";
}

std::string vocabulary_mismatch(const std::string& dir, const std::string& vocabulary,
                                const std::string& dataset) {
  const std::string file = (std::filesystem::path(dir) / kVocabularyFile).string();
  std::error_code ec;
  const bool present = std::filesystem::exists(file, ec);
  const std::string way_out =
      "resume with the data the run started with, or start it again "
      "with --overwrite";
  if (!present && vocabulary.empty()) return {};
  if (!present)
    return fmt::format(
        "--resume {}: {} is missing, so the vocabulary the checkpoints were trained on is "
        "unknown; {} now has a char vocabulary of its own: {}",
        dir, file, dataset, way_out);
  std::ifstream in(file, std::ios::binary);
  std::ostringstream saved;
  saved << in.rdbuf();
  if (saved.str() == vocabulary) return {};
  if (vocabulary.empty())
    return fmt::format(
        "--resume {}: {} holds the char vocabulary the checkpoints were trained on, but {} now "
        "has no vocabulary file (tokenizer byte?): {}",
        dir, file, dataset, way_out);
  // Lines: "[", then entry k on line k + 1, then "]".
  const std::vector<std::string> before = lines_of(saved.str()), now = lines_of(vocabulary);
  size_t line = 0;
  while (line < before.size() && line < now.size() && entry(before[line]) == entry(now[line]))
    ++line;
  const auto count = [](const std::vector<std::string>& lines) {
    return lines.size() >= 2 ? lines.size() - 2 : 0;
  };
  return fmt::format(
      "--resume {}: {} ({} characters) differs from the vocabulary {} gives now ({} characters), "
      "first at id {}: the checkpoints' ids would mean other characters; {}",
      dir, file, count(before), dataset, count(now), line > 0 ? line - 1 : 0, way_out);
}

}  // namespace dtrain
