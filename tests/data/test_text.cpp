// The text dataset: byte and char tokenizers, the split cut, windows, sizes and bad input.
#include <doctest/doctest.h>

#include <string>

#include "core/error.h"  // InputError
#include "data/dataset.h"
#include "data/text.h"
#include "fixtures.h"        // TempDir, message_of, contains
#include "token_fixtures.h"  // write_text, text_options, window_of

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// 100 printable ASCII bytes, byte i = 32 + i % 95: the first 95 tell their position.
std::string hundred_bytes() {
  std::string s;
  for (int i = 0; i < 100; ++i) s += static_cast<char>(32 + i % 95);
  return s;
}

}  // namespace

TEST_CASE("text, byte tokenizer: ids are bytes, windows shifted by one, 90 % trains") {
  TempDir dir;
  const std::string text = hundred_bytes();
  write_text(dir.path() / "t.txt", text);
  const DatasetConfig o = text_options((dir.path() / "t.txt").string(), 4);
  auto train = open_dataset(o, Split::train);
  auto test = open_dataset(o, Split::test);
  CHECK(train->num_classes() == 256);
  CHECK(train->sample_shape() == Shape{4});
  CHECK(train->label_shape() == Shape{4});
  CHECK(train->size() == (90 - 1) / 4);  // the first 90 tokens
  CHECK(test->size() == (10 - 1) / 4);   // the last 10
  CHECK(train->vocabulary_json().empty());
  for (int64_t i = 0; i < train->size(); ++i) {
    const Window w = window_of(*train, i);
    for (int t = 0; t < 4; ++t) {
      CHECK(w.inputs[t] == static_cast<unsigned char>(text[4 * i + t]));
      CHECK(w.labels[t] == static_cast<unsigned char>(text[4 * i + t + 1]));
    }
  }
  const Window v = window_of(*test, 1);
  CHECK(v.inputs[0] == static_cast<unsigned char>(text[90 + 4]));
  CHECK(v.labels[3] == static_cast<unsigned char>(text[90 + 8]));
  CHECK(contains(train->describe(), "text train: 22 × [4], 256 classes"));
  CHECK(contains(test->describe(), "tokens 90–100 of 100"));
  // The one-label interface writes the same inputs and returns the last label.
  std::vector<float> x(4);
  CHECK(train->load(3, x.data(), 0) == static_cast<unsigned char>(text[16]));
  CHECK(x[0] == static_cast<unsigned char>(text[12]));
}

TEST_CASE("text, split cut: the first ⌊n·(1 − valid_fraction)⌋ tokens train, as nanoGPT") {
  CHECK(training_tokens(1000, 0.1) == 900);
  CHECK(training_tokens(7, 0.1) == 6);  // int(6.3)
  CHECK(training_tokens(4137850, 0.1) == 3724065);
  CHECK(training_tokens(10, 0.5) == 5);
  TempDir dir;
  write_text(dir.path() / "t.txt", hundred_bytes());
  DatasetConfig o = text_options((dir.path() / "t.txt").string(), 3, "byte", 0.25);
  CHECK(open_dataset(o, Split::train)->size() == (75 - 1) / 3);
  CHECK(open_dataset(o, Split::test)->size() == (25 - 1) / 3);
  CHECK(window_of(*open_dataset(o, Split::test), 0).inputs[0] == 32 + 75);
}

TEST_CASE("text, char tokenizer: the distinct code points sorted, written as vocab.json") {
  TempDir dir;
  // "wörld" holds a two-byte character; "€" three bytes, "𝄞" four.
  const std::string text = "hello wörld\n\"€\\𝄞 hello hello hello";
  write_text(dir.path() / "t.txt", text);
  const TextTokens t = tokenize_text((dir.path() / "t.txt").string(), "char");
  const std::vector<char32_t> expected{U'\n', U' ', U'"', U'\\', U'd', U'e', U'h',
                                       U'l',  U'o', U'r', U'w',  U'ö', U'€', U'𝄞'};
  CHECK(t.chars == expected);
  CHECK(t.vocab == 14);
  REQUIRE(t.ids.size() == 34);  // code points, not bytes
  CHECK(t.ids[0] == 6);         // h
  CHECK(t.ids[7] == 11);        // ö
  CHECK(t.ids[11] == 0);        // \n
  CHECK(t.ids[13] == 12);       // €
  CHECK(t.ids[15] == 13);       // 𝄞
  CHECK(vocabulary_json(t.chars) ==
        "[\n\"\\n\",\n\" \",\n\"\\\"\",\n\"\\\\\",\n\"d\",\n\"e\",\n\"h\",\n\"l\",\n\"o\",\n"
        "\"r\",\n\"w\",\n\"ö\",\n\"€\",\n\"𝄞\"\n]\n");
  CHECK(vocabulary_json({U'\t', U'\x01'}) == "[\n\"\\t\",\n\"\\u0001\"\n]\n");

  auto train = open_dataset(text_options((dir.path() / "t.txt").string(), 2, "char"), Split::train);
  CHECK(train->num_classes() == 14);
  CHECK(train->vocabulary_json() == vocabulary_json(t.chars));
  const Window w = window_of(*train, 3);
  CHECK(w.inputs == std::vector<int32_t>{t.ids[6], t.ids[7]});
  CHECK(w.labels == std::vector<int32_t>{t.ids[7], t.ids[8]});
  // The vocabulary comes from the whole file: the test split has the same one.
  auto test = open_dataset(text_options((dir.path() / "t.txt").string(), 2, "char"), Split::test);
  CHECK(test->num_classes() == 14);
  CHECK(test->vocabulary_json() == train->vocabulary_json());
  // The byte tokenizer reads the same file as its bytes.
  CHECK(tokenize_text((dir.path() / "t.txt").string(), "byte").ids.size() == text.size());
}

TEST_CASE("text: train_size and test_size keep the first windows; the same file, the same data") {
  TempDir dir;
  write_text(dir.path() / "t.txt", hundred_bytes());
  DatasetConfig o = text_options((dir.path() / "t.txt").string(), 4);
  o.train_size = 5;
  o.test_size = 1;
  auto train = open_dataset(o, Split::train);
  auto test = open_dataset(o, Split::test);
  CHECK(train->size() == 5);
  CHECK(test->size() == 1);
  CHECK(window_of(*train, 4).inputs[0] == 32 + 16);
  CHECK(window_of(*test, 0).inputs[0] == 32 + 90);
  auto again = open_dataset(o, Split::train);
  for (int64_t i = 0; i < 5; ++i) CHECK(window_of(*again, i).labels == window_of(*train, i).labels);
  o.train_size = 23;  // 22 windows
  const std::string m = message_of<InputError>([&] { open_dataset(o, Split::train); });
  CHECK(contains(m, "dataset.train_size: 23 exceeds the 22 samples"));
  CHECK(contains(m, "t.txt"));
}

TEST_CASE("text: bad input is an InputError naming the file or the key") {
  TempDir dir;
  const std::string file = (dir.path() / "t.txt").string();
  write_text(file, hundred_bytes());
  auto error = [](DatasetConfig o, Split split = Split::train) {
    return message_of<InputError>([&] { open_dataset(o, split); });
  };
  SUBCASE("missing file") {
    const std::string m = error(text_options((dir.path() / "none.txt").string(), 4));
    CHECK(contains(m, "dataset.path: " + (dir.path() / "none.txt").string() + " does not exist"));
    CHECK(contains(m, "scripts/setup.sh"));
  }
  SUBCASE("a folder") {
    CHECK(contains(error(text_options(dir.str(), 4)), "is a folder"));
  }
  SUBCASE("empty file") {
    write_text(dir.path() / "empty.txt", "");
    const std::string m = error(text_options((dir.path() / "empty.txt").string(), 4));
    CHECK(contains(m, "empty.txt: the text file is empty"));
  }
  SUBCASE("shorter than one window: training split") {
    const std::string m = error(text_options(file, 90));  // 90 training tokens
    CHECK(contains(m, file + ": the training split"));
    CHECK(contains(m, "holds 90 token(s), fewer than one window of dataset.block_size 90"));
  }
  SUBCASE("shorter than one window: validation split") {
    const std::string m = error(text_options(file, 10), Split::test);  // 10 tokens
    CHECK(contains(m, file + ": the validation split (the last 10 % of its 100 byte tokens)"));
    CHECK(contains(m, "dataset.block_size 10"));
  }
  SUBCASE("block_size ≤ 0") {
    CHECK(contains(error(text_options(file, 0)), "dataset.block_size: 0 is not > 0"));
    CHECK(contains(error(text_options(file, -3)), "dataset.block_size: -3 is not > 0"));
  }
  SUBCASE("valid_fraction outside (0, 1)") {
    for (double f : {0.0, 1.0, -0.5, 1.5}) {
      CAPTURE(f);
      CHECK(contains(error(text_options(file, 4, "byte", f)), "dataset.valid_fraction: "));
      CHECK(contains(error(text_options(file, 4, "byte", f)), "is outside (0, 1)"));
    }
  }
  SUBCASE("unknown tokenizer") {
    CHECK(contains(error(text_options(file, 4, "bpe")), "dataset.tokenizer: unknown tokenizer"));
  }
  SUBCASE("char: not UTF-8, at its byte offset; byte reads it") {
    write_text(dir.path() / "latin1.txt", std::string("caf\xe9 au lait, ") + hundred_bytes());
    const std::string latin1 = (dir.path() / "latin1.txt").string();
    const std::string m = error(text_options(latin1, 4, "char"));
    CHECK(contains(m, latin1 + ": not UTF-8 at byte offset 3 (an invalid byte sequence)"));
    CHECK(open_dataset(text_options(latin1, 4, "byte"), Split::train)->size() > 0);
    write_text(dir.path() / "cut.txt", hundred_bytes() + "\xe2\x82");  // € cut off
    const std::string cut = (dir.path() / "cut.txt").string();
    CHECK(contains(error(text_options(cut, 4, "char")),
                   cut + ": not UTF-8 at byte offset 100 (a sequence cut off by the end"));
    write_text(dir.path() / "surrogate.txt", "ab\xed\xa0\x80" + hundred_bytes());
    const std::string surrogate = (dir.path() / "surrogate.txt").string();
    CHECK(contains(error(text_options(surrogate, 4, "char")), "not UTF-8 at byte offset 2"));
  }
}
