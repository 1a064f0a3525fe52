// The token-file dataset (llm.c's train.bin / val.bin) and the language-model stand-ins.
#include <doctest/doctest.h>

#include "core/error.h"  // InputError
#include "data/dataset.h"
#include "data/token_file.h"
#include "fixtures.h"        // TempDir, message_of, contains, write_bytes
#include "token_fixtures.h"  // write_token_file, counting_tokens, token_options, window_of

using namespace dtrain;
using namespace dtrain::testing;

TEST_CASE("tokens: train.bin and val.bin read as windows shifted by one") {
  TempDir dir;
  write_token_file(dir.path() / "train.bin", counting_tokens(41));
  write_token_file(dir.path() / "val.bin", counting_tokens(13, 1000));
  const DatasetConfig o = token_options(dir.str(), 8);
  auto train = open_dataset(o, Split::train);
  auto test = open_dataset(o, Split::test);
  CHECK(train->size() == 5);  // (41 − 1) / 8
  CHECK(test->size() == 1);   // (13 − 1) / 8
  CHECK(train->sample_shape() == Shape{8});
  CHECK(train->label_shape() == Shape{8});
  CHECK(train->num_classes() == 50257);
  CHECK(train->vocabulary_json().empty());
  for (int64_t i = 0; i < train->size(); ++i) {
    const Window w = window_of(*train, i);
    for (int t = 0; t < 8; ++t) {
      CHECK(w.inputs[t] == 8 * i + t);
      CHECK(w.labels[t] == 8 * i + t + 1);
    }
  }
  CHECK(window_of(*test, 0).labels[7] == 1008);
  CHECK(contains(train->describe(), "tokens train: 5 × [8], 50257 classes"));
  CHECK(contains(train->describe(), "train.bin: 41 tokens"));
  // The largest uint16 id reads as itself, not as a negative number.
  write_token_file(dir.path() / "train.bin", std::vector<uint16_t>(9, 65535));
  CHECK(window_of(*open_dataset(token_options(dir.str(), 8, 65536), Split::train), 0).inputs[3] ==
        65535);
}

TEST_CASE("tokens: vocab_size bounds the ids; train_size and test_size keep the first windows") {
  TempDir dir;
  write_token_file(dir.path() / "train.bin", counting_tokens(81));
  write_token_file(dir.path() / "val.bin", counting_tokens(81));
  DatasetConfig o = token_options(dir.str(), 4, 81);
  o.train_size = 3;
  o.test_size = 20;
  CHECK(open_dataset(o, Split::train)->size() == 3);
  CHECK(open_dataset(o, Split::test)->size() == 20);
  CHECK(open_dataset(o, Split::train)->num_classes() == 81);
  o.get<TokenFileOptions>().vocab_size = 80;  // token 80 is out of range
  const std::string m = message_of<InputError>([&] { open_dataset(o, Split::train); });
  CHECK(contains(m, (dir.path() / "train.bin").string() +
                        ": token 80 (byte offset 1184) is id 80, not below dataset.vocab_size 80"));
  o.get<TokenFileOptions>().vocab_size = 81;
  o.test_size = 21;
  CHECK(contains(
      message_of<InputError>([&] { open_dataset(o, Split::test); }),
      "dataset.test_size: 21 exceeds the 20 samples of " + (dir.path() / "val.bin").string()));
}

TEST_CASE("tokens: bad files are InputErrors naming the file and what was expected") {
  TempDir dir;
  const std::string train = (dir.path() / "train.bin").string();
  write_token_file(dir.path() / "val.bin", counting_tokens(100));
  auto error = [&](int64_t block = 4, Split split = Split::train) {
    return message_of<InputError>([&] { open_dataset(token_options(dir.str(), block), split); });
  };
  SUBCASE("missing") {
    CHECK(contains(error(), "dataset.path: " + dir.str() + " holds no train.bin"));
  }
  SUBCASE("wrong magic") {
    write_token_file(train, counting_tokens(100), 20240521);
    CHECK(contains(error(), train + ": wrong magic number 20240521, expected 20240520"));
  }
  SUBCASE("wrong version") {
    write_token_file(train, counting_tokens(100), kTokenFileMagic, 2);
    CHECK(contains(error(), train + ": version 2, expected 1 (uint16 token ids)"));
  }
  SUBCASE("shorter than the header") {
    write_bytes(train, std::vector<uint8_t>(100, 0));
    CHECK(contains(error(), train + ": truncated: expected at least 1024 bytes"));
  }
  SUBCASE("shorter than the header says") {
    write_token_file(train, counting_tokens(100), kTokenFileMagic, kTokenFileVersion, 101);
    CHECK(contains(error(), train + ": truncated: expected 1226 bytes (the header and 101 uint16 "
                                    "tokens, as its header says), got 1224"));
  }
  SUBCASE("longer than the header says") {
    write_token_file(train, counting_tokens(100), kTokenFileMagic, kTokenFileVersion, 99);
    CHECK(contains(error(), train + ": expected 1222 bytes"));
    CHECK(contains(error(), "got 1224 (trailing data)"));
  }
  SUBCASE("shorter than one window") {
    write_token_file(train, counting_tokens(4));
    CHECK(contains(error(4), train + ": the training split (the whole file) holds 4 token(s), "
                                     "fewer than one window of dataset.block_size 4"));
    CHECK(contains(error(100, Split::test), "val.bin: the validation split"));
  }
  SUBCASE("block_size ≤ 0") {
    write_token_file(train, counting_tokens(100));
    CHECK(contains(error(0), "dataset.block_size: 0 is not > 0"));
  }
  SUBCASE("vocab_size beyond uint16") {
    write_token_file(train, counting_tokens(100));
    CHECK(contains(message_of<InputError>(
                       [&] { open_dataset(token_options(dir.str(), 4, 70000), Split::train); }),
                   "dataset.vocab_size: 70000 is outside [2, 65536]"));
  }
}

TEST_CASE("stand-ins of text and token files: windows of random ids with the real shapes") {
  DatasetConfig text = text_options("/nonexistent/kjv.txt", 256);
  CHECK(dataset_files_missing(text));
  auto train = open_stand_in(text, Split::train);
  auto test = open_stand_in(text, Split::test);
  CHECK(train->sample_shape() == Shape{256});
  CHECK(train->label_shape() == Shape{256});
  CHECK(train->num_classes() == 256);
  CHECK(train->size() == (3724065 - 1) / 256);  // the King James Bible's 90 %
  CHECK(test->size() == (4137850 - 3724065 - 1) / 256);
  CHECK(contains(train->describe(), "STAND-IN"));
  CHECK(contains(train->describe(), "256 byte ids"));
  const Window w = window_of(*train, 7);
  CHECK(w.inputs == window_of(*train, 7).inputs);  // a pure function of the position
  for (int t = 0; t + 1 < 256; ++t) CHECK(w.labels[t] == w.inputs[t + 1]);
  for (int32_t id : w.labels) CHECK((id >= 0 && id < 256));
  CHECK(window_of(*test, 7).inputs != w.inputs);

  text.get<TextOptions>().tokenizer = "char";
  CHECK(contains(open_stand_in(text, Split::train)->describe(), "a guess"));
  text.train_size = 10;
  CHECK(open_stand_in(text, Split::train)->size() == 10);

  DatasetConfig tokens = token_options("/nonexistent/owt", 1024);
  auto owt = open_stand_in(tokens, Split::train);
  CHECK(owt->num_classes() == 50257);
  CHECK(owt->sample_shape() == Shape{1024});
  CHECK(owt->label_shape() == Shape{1024});
  CHECK(owt->size() == (9035582198 - 1) / 1024);
  CHECK(open_stand_in(tokens, Split::test)->size() == (4434897 - 1) / 1024);
  const Window last = window_of(*owt, owt->size() - 1);
  for (int32_t id : last.inputs) CHECK((id >= 0 && id < 50257));
  tokens.get<TokenFileOptions>().block_size = 0;
  CHECK(contains(message_of<InputError>([&] { open_stand_in(tokens, Split::train); }),
                 "dataset.block_size"));
}
