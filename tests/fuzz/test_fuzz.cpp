// A seeded random mutator (bad input everywhere): thousands of mutated experiment
// files go through the config reader, mutated idx (plain and gzip) and CIFAR files through the
// dataset parsers, mutated safetensors files through the weights reader. Every case must end in
// success or an InputError — what main turns into exit 0 or 2 — never another exception (exit 1), a
// crash or a hang (the CTest timeout). A failing case prints its seed and input; DTRAIN_FUZZ_CASES
// scales the run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>  // getenv
#include <cstring>  // memcpy: a safetensors length
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../data/fixtures.h"    // TempDir, write_bytes, idx_bytes, cifar_bytes
#include "core/error.h"          // InputError
#include "data/dataset.h"        // open_dataset
#include "data/dataset_table.h"  // dataset_defaults
#include "nn/safetensors.h"      // decode_safetensors
#include "run/config.h"          // parse_config

using namespace dtrain;
using namespace dtrain::testing;
namespace fs = std::filesystem;

namespace {

int cases(int fallback) {
  const char* n = std::getenv("DTRAIN_FUZZ_CASES");
  return n ? std::atoi(n) : fallback;
}

// The experiment files of the repository: the corpus the mutations start from.
std::vector<std::string> corpus() {
  std::vector<std::string> texts;
  for (const auto& e : fs::recursive_directory_iterator(DTRAIN_SOURCE_DIR "/configs")) {
    if (e.path().extension() != ".yaml") continue;
    std::ifstream in(e.path());
    std::stringstream s;
    s << in.rdbuf();
    texts.push_back(s.str());
  }
  std::sort(texts.begin(), texts.end());  // the directory's order is not the same everywhere
  return texts;
}

// Tokens that YAML and dtrain's schema treat specially.
const std::vector<std::string> kTokens = {
    ":",         "- ",          "[",    "]",        "{",
    "}",         ",",           "\n",   "  ",       "#",
    "\"",        "'",           "&a ",  "*a",       "!!str ",
    "!!binary ", "~",           "null", "-1",       "0",
    "1e400",     "-1e-400",     "nan",  ".inf",     "99999999999999999999",
    "0x10",      "true",        "[]",   "{}",       "name: ",
    "layers: ",  "stages: [a]", "K: ",  "auto",     "[1, 2, 3]",
    "{a: b}",    "\t",          "\x00", "\xff\xfe", "\xe2\x80\x8b"};

std::string mutate(std::string s, std::mt19937& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = pick(s.size() + 1);
    switch (rng() % 6) {
      case 0:  // a random byte
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng() & 0xff);
        break;
      case 1:  // a range deleted
        s.erase(at, pick(24) + 1);
        break;
      case 2:  // a token inserted
        s.insert(at, kTokens[pick(kTokens.size())]);
        break;
      case 3: {  // a line repeated
        const size_t begin = s.rfind('\n', at == 0 ? 0 : at - 1);
        const size_t from = begin == std::string::npos ? 0 : begin + 1;
        const size_t end = s.find('\n', from);
        s.insert(from,
                 s.substr(from, end == std::string::npos ? std::string::npos : end - from + 1));
        break;
      }
      case 4: {  // a number replaced by a token
        const size_t digit = s.find_first_of("0123456789", at);
        if (digit != std::string::npos) {
          const size_t end = s.find_first_not_of("0123456789.e-", digit);
          s.replace(digit, (end == std::string::npos ? s.size() : end) - digit,
                    kTokens[pick(kTokens.size())]);
        }
        break;
      }
      default:  // cut short
        s.resize(at);
    }
  }
  return s;
}

// What the cases ended in: the mutator must reach both sides (not a vacuous test).
struct Outcomes {
  int passed = 0, refused = 0;
};

// Runs `f`; success and InputError pass, anything else fails the case, naming it.
template <class F>
void expect_clean(F&& f, const std::string& what, Outcomes& o) {
  try {
    f();
    ++o.passed;
  } catch (const InputError&) {
    ++o.refused;
  } catch (const std::exception& e) {
    FAIL_CHECK(what << "\n-> " << std::string(typeid(e).name()) << ": " << std::string(e.what()));
  }
}

}  // namespace

TEST_CASE("mutated experiment files: parsed, or an InputError") {
  const std::vector<std::string> texts = corpus();
  REQUIRE(texts.size() > 10);
  std::mt19937 rng(20261125);
  const int n = cases(3000);
  Outcomes o;
  for (int c = 0; c < n; ++c) {
    const std::string yaml = mutate(texts[static_cast<size_t>(rng() % texts.size())], rng);
    expect_clean([&] { parse_config(yaml, "fuzz.yaml"); },
                 "case " + std::to_string(c) + ":\n" + yaml, o);
  }
  MESSAGE("experiment files: " << o.passed << " parsed, " << o.refused << " refused");
  CHECK(o.passed > n / 20);
  CHECK(o.refused > n / 4);
}

TEST_CASE("mutated idx and CIFAR files: read, or an InputError") {
  std::mt19937 rng(7);
  const int n = cases(600);
  Outcomes idx_outcomes, cifar_outcomes;
  // Valid originals: 6 idx samples of 5x4, 3 CIFAR records per batch.
  std::vector<uint8_t> pixels, labels;
  for (uint32_t s = 0; s < 6; ++s) {
    for (uint32_t i = 0; i < 20; ++i) pixels.push_back(idx_pixel(s, i));
    labels.push_back(idx_label(s));
  }
  const std::vector<uint8_t> images = idx_bytes(2051, {6, 5, 4}, pixels);
  const std::vector<uint8_t> label_file = idx_bytes(2049, {6}, labels);
  const std::vector<uint8_t> cifar = cifar_bytes(0, 3, 1, 10);
  auto mutate_bytes = [&](std::vector<uint8_t> b) {
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = b.empty() ? 0 : rng() % b.size();
      switch (rng() % 5) {
        case 0:  // a header byte (where the sizes are)
          if (b.size() > 16) b[rng() % 16] = static_cast<uint8_t>(rng());
          break;
        case 1:
          if (!b.empty()) b[at] = static_cast<uint8_t>(rng());
          break;
        case 2:
          b.resize(at);
          break;
        case 3:
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), 1 + rng() % 40,
                   static_cast<uint8_t>(rng()));
          break;
        default:  // a huge dimension
          if (b.size() >= 8) b[4 + rng() % 4] = 0xff;
      }
    }
    return b;
  };
  for (int c = 0; c < n; ++c) {
    TempDir dir;
    const bool gz = c % 3 == 0;
    const std::string ext = gz ? ".gz" : "";
    const bool which = rng() % 2;
    write_bytes(dir.path() / ("train-images-idx3-ubyte" + ext),
                which ? mutate_bytes(images) : images, gz);
    write_bytes(dir.path() / ("train-labels-idx1-ubyte" + ext),
                which ? label_file : mutate_bytes(label_file), gz);
    // Opens the dataset `name` at `path` and loads every sample of it.
    auto read_all = [](const std::string& name, const std::string& path) {
      DatasetConfig o = dataset_defaults(name);
      o.path = path;
      auto d = open_dataset(o, Split::train);
      std::vector<float> out(static_cast<size_t>(d->sample_shape().numel()));
      for (int64_t s = 0; s < d->size(); ++s) d->load(s, out.data(), 0);
    };
    expect_clean([&] { read_all("mnist", dir.str()); }, "idx case " + std::to_string(c),
                 idx_outcomes);

    for (int b = 1; b <= 5; ++b)
      write_bytes(dir.path() / "cifar" / ("data_batch_" + std::to_string(b) + ".bin"),
                  b == 1 + static_cast<int>(rng() % 5) ? mutate_bytes(cifar) : cifar);
    expect_clean([&] { read_all("cifar10", (dir.path() / "cifar").string()); },
                 "cifar case " + std::to_string(c), cifar_outcomes);
  }
  MESSAGE("idx: " << idx_outcomes.passed << " read, " << idx_outcomes.refused << " refused; cifar: "
                  << cifar_outcomes.passed << " read, " << cifar_outcomes.refused << " refused");
  CHECK(idx_outcomes.refused > n / 4);
  CHECK(cifar_outcomes.refused > n / 4);
}

TEST_CASE("mutated safetensors files: decoded, or an InputError") {
  std::mt19937 rng(3);
  const int n = cases(3000);
  const std::string original =
      encode_safetensors({{"c1.weight", {2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}},
                          {"c1.bias", {2}, {0.5f, -0.5f}},
                          {"bn.running_var", {2}, {1, 1}}},
                         {{"model", "lenet"}});
  uint64_t length = 0;
  std::memcpy(&length, original.data(), 8);
  const std::string header = original.substr(8, length), data = original.substr(8 + length);
  Outcomes o;
  for (int c = 0; c < n; ++c) {
    std::string bytes;
    if (c % 2 == 0) {  // the JSON mutated, its length told right: the header's checks
      const std::string text = mutate(header, rng);
      bytes.assign(8, '\0');
      const uint64_t size = text.size();
      std::memcpy(bytes.data(), &size, 8);
      bytes += text + data;
    } else {  // any byte: the length, the header, the data
      bytes = mutate(original, rng);
    }
    expect_clean([&] { decode_safetensors(bytes, "fuzz.safetensors"); },
                 "safetensors case " + std::to_string(c), o);
  }
  MESSAGE("safetensors: " << o.passed << " decoded, " << o.refused << " refused");
  CHECK(o.passed > n / 50);
  CHECK(o.refused > n / 4);
}
