// The `dataset:` section (see dataset_section.h). The shared keys are one schema; each row's keys
// are read, written and documented at a place in it, after the shared key the row names
// (keys_after), so that each dataset's keys keep the order they have always had in config.yaml
// and in the messages.
#include "data/dataset_section.h"

#include <fmt/format.h>  // fmt::format, fmt::join: messages and doc lines

#include <algorithm>  // find
#include <map>

#include "core/error.h"          // DTRAIN_CHECK
#include "data/dataset_table.h"  // the rows

namespace dtrain {

using namespace config;

namespace {

std::string joined(const std::vector<std::string>& items, const char* separator) {
  return fmt::format("{}", fmt::join(items, separator));
}

// The names of the rows `pick` selects, in table order.
template <class Pick>
std::vector<std::string> names_where(Pick pick) {
  std::vector<std::string> names;
  for (const DatasetEntry& row : dataset_rows())
    if (pick(row)) names.push_back(row.name);
  return names;
}

// "a, b: note; c: other note": the rows' remarks grouped by remark, in table order.
std::string remarks(std::string DatasetEntry::*remark) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const DatasetEntry& row : dataset_rows()) {
    const std::string& text = row.*remark;
    if (text.empty()) continue;
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == text; });
    if (it == groups.end()) it = groups.insert(groups.end(), {text, {}});
    it->second.push_back(row.name);
  }
  std::vector<std::string> parts;
  for (const auto& [text, names] : groups) parts.push_back(joined(names, ", ") + ": " + text);
  return joined(parts, "; ");
}

// " (x)" when x is not empty.
std::string in_parentheses(const std::string& x) {
  return x.empty() ? "" : " (" + x + ")";
}

// ---- the shared keys' doc lines, from the rows -----------------------------------------------

std::string path_doc() {
  const auto files =
      names_where([](const DatasetEntry& r) { return r.on_disk.kind == OnDisk::Kind::file; });
  return "the folder holding its files" +
         in_parentheses(files.empty() ? "" : joined(files, ", ") + ": the file") +
         ", relative to the working directory";
}

std::string default_path_text() {
  std::vector<std::string> parts;
  for (const DatasetEntry& row : dataset_rows())
    if (row.default_path)
      parts.push_back(row.name + ": " + row.default_path->path + " (" + row.default_path->source +
                      ")");
  return joined(parts, "; ");
}

std::string train_size_doc() {
  std::vector<std::string> parts;
  if (std::string windows = remarks(&DatasetEntry::sample_is); !windows.empty())
    parts.push_back(windows);
  if (std::string zero = remarks(&DatasetEntry::train_size_zero); !zero.empty())
    parts.push_back(zero);
  return "0: the whole split; N: its first N samples" + in_parentheses(joined(parts, "; "));
}

std::string augment_doc() {
  const auto unflipped = names_where([](const DatasetEntry& r) {
    return !r.augmentation.recipe.empty() && !r.augmentation.flips;
  });
  return "training split: random crop and flip" +
         in_parentheses(unflipped.empty() ? "" : joined(unflipped, ", ") + ": no flip");
}

std::string workers_doc() {
  std::vector<std::string> decoded;
  for (const DatasetEntry& row : dataset_rows())
    if (!row.decodes.empty()) decoded.push_back(row.name + "'s " + row.decodes);
  decoded.push_back("a fast GPU");
  return "threads preparing one batch (" + joined(decoded, ", ") + ")";
}

// ---- the rows' own keys ------------------------------------------------------------------------

// Every dataset's own key, in the order of the reference (no key twice).
const std::vector<std::string>& own_keys_in_order();

// The marker field of the shared schema where the rows whose keys follow `after` read and write
// them (never written as such: write_dataset puts their keys in its place).
std::string place_named(const std::string& after) {
  return "(own keys after " + after + ")";
}
bool is_place(const std::string& key) {
  return key.starts_with("(own keys after ");
}

// Where a key of some rows is read: after the shared key its first owner names.
const std::string& place_of_key(const std::string& key) {
  for (const DatasetEntry& row : dataset_rows())
    if (row.keys->has_key(key)) return row.keys_after;
  static const std::string none;
  return none;
}

const DatasetEntry* chosen_row(Section& s, const DatasetConfig& d) {
  if (d.name.empty() || s.reader().has_problem(s.path_of("name"))) return nullptr;
  return find_dataset(d.name);
}

// A key of other datasets given to `row`: a problem naming the datasets it belongs to, with the
// reason its first owner gives.
void report_foreign_key(Section& s, const DatasetEntry& row, const std::string& key) {
  std::vector<std::string> owners;
  std::string reason;
  for (const DatasetEntry& other : dataset_rows()) {
    if (!other.keys->has_key(key)) continue;
    owners.push_back(other.name);
    if (reason.empty() && other.own_key_reasons.count(key)) reason = other.own_key_reasons.at(key);
  }
  s.reader().add(s.path_of(key), not_applying_message("dataset", "name", owners, row.name, reason),
                 s.get(key));
}

// At the place after `after`: the chosen row's keys if they go there, and the keys of other
// rows that go there, each a problem if given (as a key of a dataset that is not chosen was
// always reported in its place).
void read_own_keys(Section& s, DatasetConfig& d, const std::string& after) {
  const DatasetEntry* row = chosen_row(s, d);
  if (row && row->keys_after == after) {
    d.options = row->keys->defaults();
    row->keys->read(s, d.options);
  }
  for (const std::string& key : own_keys_in_order()) {
    if (place_of_key(key) != after) continue;
    if (!row) {
      s.get(key);  // no dataset to judge it by: taken as known
    } else if (!row->keys->has_key(key) && s.has(key)) {
      report_foreign_key(s, *row, key);
    }
  }
}

YAML::Node write_own_keys(const DatasetConfig& d, Style style, const std::string& after) {
  const DatasetEntry* row = find_dataset(d.name);
  if (!row || row->keys_after != after || !d.options.has_value()) return YAML::Node();
  return row->keys->write(d.options, style);
}

// The shared keys, with a place after each one that some row's keys follow.
class SharedSchema {
 public:
  SharedSchema() : schema_("dataset") {}
  Schema<DatasetConfig>& schema() { return schema_; }
  // Adds the place after the last declared key when a row's keys follow it.
  void place_after(const std::string& key) {
    placed_.push_back(key);
    bool used = false;
    for (const DatasetEntry& row : dataset_rows()) used = used || row.keys_after == key;
    if (!used) return;
    schema_.custom(
        place_named(key), "map", "",
        [key](Section& s, DatasetConfig& d) { read_own_keys(s, d, key); },
        [key](const DatasetConfig& d, Style style) { return write_own_keys(d, style, key); });
  }
  Schema<DatasetConfig> done() {
    for (const DatasetEntry& row : dataset_rows())
      DTRAIN_CHECK(std::find(placed_.begin(), placed_.end(), row.keys_after) != placed_.end())
          << "dataset '" << row.name << "': keys_after '" << row.keys_after
          << "' is no shared key of `dataset:`";
    return std::move(schema_);
  }

 private:
  Schema<DatasetConfig> schema_;
  std::vector<std::string> placed_;
};

Schema<DatasetConfig> make_shared_schema() {
  const std::vector<std::string> names = dataset_names();
  const auto with_files =
      names_where([](const DatasetEntry& r) { return r.on_disk.kind != OnDisk::Kind::nothing; });
  const auto without_files =
      names_where([](const DatasetEntry& r) { return r.on_disk.kind == OnDisk::Kind::nothing; });
  const auto augmented =
      names_where([](const DatasetEntry& r) { return !r.augmentation.recipe.empty(); });
  SharedSchema shared;
  Schema<DatasetConfig>& s = shared.schema();
  s.key("name", &DatasetConfig::name, choice(names),
        "the dataset (datasets/README.md says how to obtain each)")
      .required("one of " + joined(names, ", "));
  shared.place_after("name");
  s.key("path", &DatasetConfig::path, text(), path_doc())
      .only_for("name", with_files,
                without_files.empty() ? "" : joined(without_files, ", ") + " data needs no files");
  if (const std::string text = default_path_text(); !text.empty())
    s.fallback(
        [](DatasetConfig& d) {
          const DatasetEntry* row = find_dataset(d.name);
          if (row && row->default_path) d.path = row->default_path->path;
        },
        text);
  shared.place_after("path");
  s.key("batch_size", &DatasetConfig::batch_size, integer(Bounds::above(0)),
        "the GLOBAL batch, split evenly over the data-parallel ranks");
  shared.place_after("batch_size");
  s.key("test_batch_size", &DatasetConfig::test_batch_size, integer(Bounds::above(0)),
        "the global batch of evaluation")
      .fallback([](DatasetConfig& d) { d.test_batch_size = d.batch_size; }, "batch_size");
  shared.place_after("test_batch_size");
  s.key("train_size", &DatasetConfig::train_size, integer64(Bounds::at_least(0)), train_size_doc());
  shared.place_after("train_size");
  s.key("test_size", &DatasetConfig::test_size, integer64(Bounds::at_least(0)),
        "likewise for the test split" + in_parentheses(remarks(&DatasetEntry::test_size_zero)));
  shared.place_after("test_size");
  s.key("augment", &DatasetConfig::augment, boolean(), augment_doc())
      .only_for("name", augmented, "only image files are augmented");
  shared.place_after("augment");
  s.key("mean", &DatasetConfig::mean, list_of(real()),
        "per-channel normalisation; empty: the dataset's standard values");
  shared.place_after("mean");
  s.key("std", &DatasetConfig::std, list_of(real(Bounds::above(0))),
        "per-channel normalisation; empty: the dataset's standard values");
  shared.place_after("std");
  s.key("prefetch", &DatasetConfig::prefetch, integer(Bounds::at_least(0)),
        "batches loaded ahead on a background thread (0: synchronously)");
  shared.place_after("prefetch");
  s.key("workers", &DatasetConfig::workers, integer(Bounds::at_least(1)), workers_doc());
  shared.place_after("workers");
  return shared.done();
}

const Schema<DatasetConfig>& shared_schema() {
  static const Schema<DatasetConfig> s = make_shared_schema();
  return s;
}

// The keys of `row`'s section in config.yaml.
std::vector<std::string> written_keys(const DatasetEntry& row) {
  std::vector<std::string> keys;
  const YAML::Node written = write_dataset(dataset_defaults(row.name), Style::file);
  for (auto it = written.begin(); it != written.end(); ++it)
    keys.push_back(it->first.as<std::string>());
  return keys;
}

// The order of the reference: every row's keys in its own order, a key first seen in a later
// row placed before the next of its row's keys already placed (or last).
const std::vector<std::string>& reference_order() {
  static const std::vector<std::string> order = [] {
    std::vector<std::string> merged;
    for (const DatasetEntry& row : dataset_rows()) {
      const std::vector<std::string> keys = written_keys(row);
      for (size_t i = 0; i < keys.size(); ++i) {
        if (std::find(merged.begin(), merged.end(), keys[i]) != merged.end()) continue;
        auto at = merged.end();
        for (size_t j = i + 1; j < keys.size() && at == merged.end(); ++j)
          at = std::find(merged.begin(), merged.end(), keys[j]);
        merged.insert(at, keys[i]);
      }
    }
    return merged;
  }();
  return order;
}

const std::vector<std::string>& own_keys_in_order() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> own;
    for (const std::string& key : reference_order())
      for (const DatasetEntry& row : dataset_rows())
        if (row.keys->has_key(key)) {
          own.push_back(key);
          break;
        }
    return own;
  }();
  return keys;
}

}  // namespace

void read_dataset(Section& s, DatasetConfig& out) {
  shared_schema().read(s, out);
}

YAML::Node write_dataset(const DatasetConfig& d, Style style) {
  const YAML::Node shared = shared_schema().write(d, style);
  YAML::Node section(YAML::NodeType::Map);
  for (auto it = shared.begin(); it != shared.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (!is_place(key)) {
      section[key] = it->second;
      continue;
    }
    for (auto own = it->second.begin(); own != it->second.end(); ++own)
      section[own->first.as<std::string>()] = own->second;
  }
  return section;
}

std::vector<KeyDoc> dataset_reference() {
  std::vector<KeyDoc> own;
  for (const DatasetEntry& row : dataset_rows())
    for (KeyDoc doc : row.keys->reference("dataset")) {
      doc.applies = "dataset " + row.name;
      own.push_back(std::move(doc));
    }
  own = merge_alike(own);
  std::map<std::string, KeyDoc> shared;
  for (KeyDoc& doc : shared_schema().reference("dataset")) shared[doc.path] = std::move(doc);

  std::vector<KeyDoc> rows;
  for (const std::string& key : reference_order()) {
    const std::string path = "dataset." + key;
    if (auto it = shared.find(path); it != shared.end()) rows.push_back(it->second);
    for (const KeyDoc& doc : own)
      if (doc.path == path) rows.push_back(doc);
  }
  return rows;
}

void check_dataset(const DatasetConfig& d, Reader& r) {
  if (d.name.empty() || r.has_problem("dataset.name")) return;
  const DatasetEntry* row = find_dataset(d.name);
  if (!row) return;
  const bool needs_path = row->on_disk.kind != OnDisk::Kind::nothing && !row->default_path;
  if (needs_path && d.path.empty() && !r.has_problem("dataset.path"))
    r.add("dataset.path",
          fmt::format("required for dataset '{}': {}", d.name, row->on_disk.path_is));
  // Its channels are not known while a key they are read from has a problem (a bad shape).
  if (!d.options.has_value()) return;
  for (const std::string& key : row->channels_from)
    if (r.has_problem("dataset." + key)) return;
  const int channels = row->channels ? row->channels(d) : 0;
  for (const auto& [key, values] : {std::pair{"mean", &d.mean}, std::pair{"std", &d.std}}) {
    const std::string path = std::string("dataset.") + key;
    if (channels > 0 && !values->empty() && static_cast<int>(values->size()) != channels &&
        !r.has_problem(path))
      r.add(path, fmt::format("needs one entry per channel: dataset '{}' has {}, got {}", d.name,
                              channels, values->size()));
  }
}

const std::string& dataset_example() {
  static const std::string name = [] {
    for (const DatasetEntry& row : dataset_rows())
      if (row.default_path || row.on_disk.kind == OnDisk::Kind::nothing) return row.name;
    return dataset_rows().front().name;
  }();
  return name;
}

bool DatasetConfig::operator==(const DatasetConfig& other) const {
  return name == other.name &&
         one_line(write_dataset(*this, Style::file)) == one_line(write_dataset(other, Style::file));
}

}  // namespace dtrain
