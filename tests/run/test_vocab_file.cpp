// OUT/vocab.json: written when there is a vocabulary, compared on --resume.
#include <doctest/doctest.h>
#include <unistd.h>  // getpid: a folder per test process

#include <filesystem>
#include <fstream>

#include "core/error.h"      // InputError
#include "data/text.h"       // vocabulary_json: the text dataset's vocab.json
#include "run/output_dir.h"  // claim_output_dir: vocab.json is a result
#include "run/vocab_file.h"

using namespace dtrain;

namespace {

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("dtrain-test-vocab-" + std::to_string(getpid()));
  TempDir() {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("vocab.json: written with a vocabulary, the same one agrees, another is named") {
  TempDir dir;
  const std::string out = dir.path.string(), file = out + "/vocab.json";
  const std::string abc = vocabulary_json({U'\n', U'a', U'b', U'c'});
  CHECK(vocabulary_mismatch(out, "", "dataset.path t.txt").empty());  // neither has one
  write_vocabulary_file(out, "");
  CHECK_FALSE(std::filesystem::exists(file));
  CHECK(has(vocabulary_mismatch(out, abc, "dataset.path t.txt"), file + " is missing"));

  write_vocabulary_file(out, abc);
  std::ifstream in(file);
  std::string first;
  std::getline(in, first);
  CHECK(first == "[");
  CHECK(vocabulary_mismatch(out, abc, "dataset.path t.txt").empty());

  const std::string abd = vocabulary_json({U'\n', U'a', U'b', U'd'});
  std::string m = vocabulary_mismatch(out, abd, "dataset.path t.txt");
  CHECK(has(m, "--resume " + out + ": " + file +
                   " (4 characters) differs from the vocabulary "
                   "dataset.path t.txt gives now (4 characters), "
                   "first at id 3"));
  CHECK(has(m, "--overwrite"));
  m = vocabulary_mismatch(out, vocabulary_json({U' ', U'\n', U'a', U'b', U'c'}), "t");
  CHECK(has(m, "(5 characters), first at id 0"));
  m = vocabulary_mismatch(out, vocabulary_json({U'\n', U'a', U'b', U'c', U'd'}), "t");
  CHECK(has(m, "first at id 4"));
  CHECK(has(vocabulary_mismatch(out, "", "dataset.path t.txt"), "now has no vocabulary file"));

  // A folder holding only vocab.json holds a run's results.
  CHECK_THROWS_AS(claim_output_dir(out, OutputMode::fresh, false), InputError);
  claim_output_dir(out, OutputMode::overwrite, true);
  CHECK_FALSE(std::filesystem::exists(file));
}
