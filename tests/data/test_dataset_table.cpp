// The dataset table: every row's keys judged as the `dataset:` section reads them (unknown keys,
// wrong values, another dataset's keys: problems naming dataset.KEY, which load_config turns
// into exit 2), its stand-in's shapes, what "files missing" means for it, and the table of
// datasets/README.md. A new row is checked here without any edit, except its stand-in's sizes.
#include <doctest/doctest.h>

#include <yaml-cpp/yaml.h>

#include <fstream>  // datasets/README.md
#include <iterator>
#include <map>

#include "config/reader.h"         // Reader, Section
#include "data/dataset.h"          // open_stand_in, dataset_files_missing
#include "data/dataset_section.h"  // read_dataset, write_dataset, check_dataset
#include "data/dataset_table.h"    // dataset_rows
#include "fixtures.h"              // TempDir

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// The problems of reading `section` (a YAML map) as `dataset:`, as load_config renders them
// but without the file and line ("dataset.colour: unknown key").
std::vector<std::string> problems_of(const YAML::Node& section, DatasetConfig* out = nullptr) {
  YAML::Node root(YAML::NodeType::Map);
  root["dataset"] = section;
  config::Reader reader("exp.yaml", root, {});
  config::Section top(reader, root, "");
  config::Section dataset = top.child("dataset");
  DatasetConfig d;
  read_dataset(dataset, d);
  check_dataset(d, reader);
  reader.report_unknown_keys();
  std::vector<std::string> lines;
  for (const config::Problem& p : reader.problems()) {
    const std::string line = reader.format(p);
    lines.push_back(line.substr(line.find(": ") + 2));  // after "exp.yaml:LINE: "
  }
  if (out) *out = d;
  return lines;
}

bool has_line_starting(const std::vector<std::string>& lines, const std::string& start) {
  for (const std::string& line : lines)
    if (line.starts_with(start)) return true;
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  MESSAGE("no line starts with '" << start << "' in:\n" << all);
  return false;
}

// The row's section with every required key given a valid value (its block_size, a path).
YAML::Node valid_section(const DatasetEntry& row) {
  YAML::Node section = write_dataset(dataset_defaults(row.name), config::Style::file);
  for (const std::string& key : row.keys->keys())
    if (key == "block_size") section[key] = 8;
  if (section["path"] && section["path"].as<std::string>().empty())
    section["path"] = "/nonexistent/" + row.name;
  return section;
}

}  // namespace

TEST_CASE("every row's section reads back as written, without a problem") {
  for (const DatasetEntry& row : dataset_rows()) {
    CAPTURE(row.name);
    const YAML::Node section = valid_section(row);
    DatasetConfig d;
    CHECK(problems_of(section, &d).empty());
    CHECK(d.name == row.name);
    CHECK(config::one_line(write_dataset(d, config::Style::file)) == config::one_line(section));
  }
}

TEST_CASE("every row's schema rejects an unknown key, a wrong value and another row's key") {
  for (const DatasetEntry& row : dataset_rows()) {
    CAPTURE(row.name);
    YAML::Node section = valid_section(row);
    section["colour"] = "red";
    CHECK(has_line_starting(problems_of(section), "dataset.colour: unknown key"));

    for (const std::string& key : row.keys->keys()) {
      CAPTURE(key);
      YAML::Node wrong = valid_section(row);
      wrong[key] = YAML::Load("{a: 1}");  // no key of a dataset takes a map
      CHECK(has_line_starting(problems_of(wrong), "dataset." + key + ": "));
    }
    for (const DatasetEntry& other : dataset_rows())
      for (const std::string& key : other.keys->keys()) {
        if (row.keys->has_key(key)) continue;
        CAPTURE(key);
        YAML::Node foreign = valid_section(row);
        foreign[key] = 1;
        const std::vector<std::string> lines = problems_of(foreign);
        REQUIRE(lines.size() == 1);
        CHECK(lines[0].starts_with("dataset." + key + ": applies only to dataset "));
        CHECK(lines[0].find(other.name) != std::string::npos);
        CHECK(lines[0].find("not to '" + row.name + "'") != std::string::npos);
      }
  }
}

TEST_CASE("a bad dataset name judges none of the datasets' own keys") {
  YAML::Node section = YAML::Load("{name: imagenet22k, block_size: 8, shape: [1, 2, 3]}");
  const std::vector<std::string> lines = problems_of(section);
  REQUIRE(lines.size() == 1);
  CHECK(has_line_starting(lines, "dataset.name: expected one of "));
}

TEST_CASE("mean and std need one entry per channel of the row's samples") {
  for (const DatasetEntry& row : dataset_rows()) {
    CAPTURE(row.name);
    YAML::Node section = valid_section(row);
    const int channels = row.channels(dataset_defaults(row.name));
    section["mean"] = std::vector<double>(static_cast<size_t>(channels) + 1, 0.5);
    const std::vector<std::string> lines = problems_of(section);
    if (channels == 0) {  // token ids are not normalised: nothing to count
      CHECK(lines.empty());
    } else {
      REQUIRE(lines.size() == 1);
      CHECK(lines[0] == "dataset.mean: needs one entry per channel: dataset '" + row.name +
                            "' has " + std::to_string(channels) + ", got " +
                            std::to_string(channels + 1));
    }
  }
}

TEST_CASE("stand-ins have the real datasets' shapes, classes and split sizes") {
  struct Real {
    Shape sample;
    int64_t classes, train, test;
  };
  // With the keys valid_section gives (block_size 8, the other keys' defaults).
  const std::map<std::string, Real> real{
      {"mnist", {Shape{1, 28, 28}, 10, 60000, 10000}},
      {"fashion_mnist", {Shape{1, 28, 28}, 10, 60000, 10000}},
      {"cifar10", {Shape{3, 32, 32}, 10, 50000, 10000}},
      {"cifar100", {Shape{3, 32, 32}, 100, 50000, 10000}},
      {"imagefolder", {Shape{3, 224, 224}, 1000, 1281167, 50000}},
      {"text", {Shape{8}, 256, (3724065 - 1) / 8, (4137850 - 3724065 - 1) / 8}},
      {"tokens", {Shape{8}, 50257, (9035582198 - 1) / 8, (4434897 - 1) / 8}},
  };
  for (const DatasetEntry& row : dataset_rows()) {
    CAPTURE(row.name);
    DatasetConfig d;
    REQUIRE(problems_of(valid_section(row), &d).empty());
    d.path = "/nonexistent/" + row.name;
    if (!row.stand_in) {
      CHECK(row.on_disk.kind == OnDisk::Kind::nothing);  // what needs no files needs no stand-in
      CHECK_THROWS_AS(open_stand_in(d, Split::train), InputError);
      continue;
    }
    REQUIRE_MESSAGE(real.count(row.name), "add the real sizes of its stand-in to this test");
    const Real& r = real.at(row.name);
    auto train = open_stand_in(d, Split::train), test = open_stand_in(d, Split::test);
    CHECK(train->sample_shape() == r.sample);
    CHECK(train->num_classes() == r.classes);
    CHECK(train->size() == r.train);
    CHECK(test->size() == r.test);
    CHECK(train->describe().starts_with(row.name + " train: STAND-IN, no file"));
    // Its samples load, labels inside the classes.
    std::vector<float> x(static_cast<size_t>(r.sample.numel()));
    std::vector<int32_t> labels(
        static_cast<size_t>(std::max<int64_t>(train->label_shape().numel(), 1)));
    train->load_sample(train->size() - 1, x.data(), labels.data(), 0);
    for (int32_t label : labels) CHECK((label >= 0 && label < r.classes));
    // dataset.train_size asks for fewer.
    d.train_size = 5;
    CHECK(open_stand_in(d, Split::train)->size() == 5);
  }
}

TEST_CASE("files are missing where the row needs files and dataset.path has none") {
  TempDir dir;
  const fs::path empty = dir.path() / "empty", full = dir.path() / "full";
  fs::create_directories(empty);
  fs::create_directories(full);
  std::ofstream(full / "something") << "x";
  for (const DatasetEntry& row : dataset_rows()) {
    CAPTURE(row.name);
    DatasetConfig d = dataset_defaults(row.name);
    d.path = (dir.path() / "absent").string();
    switch (row.on_disk.kind) {
      case OnDisk::Kind::nothing:
        CHECK_FALSE(dataset_files_missing(d));
        break;
      case OnDisk::Kind::file:
        CHECK(dataset_files_missing(d));
        d.path = (full / "something").string();
        CHECK_FALSE(dataset_files_missing(d));
        break;
      case OnDisk::Kind::folder:
        CHECK(dataset_files_missing(d));
        d.path = "";
        CHECK(dataset_files_missing(d));
        d.path = empty.string();
        CHECK(dataset_files_missing(d));
        d.path = full.string();
        CHECK_FALSE(dataset_files_missing(d));
        // Opening the absent folder says where to read how to obtain it.
        d.path = (dir.path() / "absent").string();
        CHECK(contains(message_of<InputError>([&] { open_dataset(d, Split::train); }),
                       "does not exist (datasets/README.md says how to obtain " + row.name));
        break;
    }
  }
}

TEST_CASE("datasets/README.md holds the table of the rows") {
  const std::string path = std::string(DTRAIN_SOURCE_DIR) + "/datasets/README.md";
  std::ifstream in(path);
  REQUIRE(in);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string begin = "<!-- dataset table: begin -->\n", end = "<!-- dataset table: end -->";
  const size_t from = text.find(begin), to = text.find(end);
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  const std::string block = text.substr(from + begin.size(), to - from - begin.size());
  // On a difference, the message is the block to paste between the markers.
  CHECK_MESSAGE(block == datasets_markdown(),
                path << " differs from the table of the rows; between its markers put:\n"
                     << datasets_markdown());
}
