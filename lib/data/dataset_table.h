// The dataset table: one row per dataset — its name, a one-line summary, its own keys (a
// declarative schema over its options struct), how a split is opened, the stand-in that
// `--dry-run` and `dtrain plan` use when its files are missing, what it needs on disk, what it
// offers the model, and the facts the shared keys of `dataset:` document. Reading the section
// (dataset_section.h), validation, open_dataset, `dtrain keys` and the table of
// datasets/README.md take the datasets from here; nothing else branches on a dataset's name.
// Adding a dataset is its file (options struct, schema, opener, stand-in and `..._dataset()`
// row), one line in dataset_table.cpp and the file in CMakeLists.txt.
#pragma once
#include <any>         // the row's options struct, type-erased
#include <cstdint>     // int64_t, uint64_t
#include <functional>  // the row's functions
#include <map>         // DatasetEntry::own_key_reasons
#include <memory>      // shared_ptr, unique_ptr
#include <optional>    // DatasetEntry::default_path
#include <string>
#include <vector>

#include "config/schema.h"        // Schema, AnySchema, erase
#include "data/dataset.h"         // Dataset, Split
#include "data/dataset_config.h"  // DatasetConfig
#include "data/normalize.h"       // Normalization: a row's standard statistics

namespace dtrain {

// Opens one split of the dataset `config` names; `seed` draws generated contents and
// augmentation. Every problem with the options or the files is an InputError naming the key or
// the file.
using DatasetOpener =
    std::function<std::unique_ptr<Dataset>(const DatasetConfig&, Split, uint64_t seed)>;

// What a dataset needs on disk: nothing (generated), one file at dataset.path, or a folder of
// files there.
struct OnDisk {
  enum class Kind { nothing, file, folder };
  Kind kind = Kind::nothing;
  std::string path_is;  // what dataset.path names: "the text file" (messages)
  std::string files;    // the files under dataset.path, as Markdown (datasets/README.md)

  static OnDisk nothing() { return {}; }
  static OnDisk file(std::string path_is, std::string files) {
    return {Kind::file, std::move(path_is), std::move(files)};
  }
  static OnDisk folder(std::string files) {
    return {Kind::folder, "the directory holding its files", std::move(files)};
  }
};

// A place dataset.path takes when it is not given, and where that place comes from.
struct DefaultPath {
  std::string path;
  std::string source;  // "Debian's package"
};

// The training split's random crops and flips under `augment: true`; no recipe: none.
struct Augmentation {
  std::string recipe;  // "pad 2, random 28 × 28 crop, horizontal flip" (datasets/README.md)
  bool flips = true;   // false: no mirroring (digits), said by the `augment` key's doc
};

// The options struct of a dataset without keys of its own.
struct NoOptions {};

struct DatasetEntry {
  std::string name;                               // dataset.name
  std::string summary;                            // one line: what it is
  std::shared_ptr<const config::AnySchema> keys;  // its own keys besides the shared ones
  DatasetOpener open;
  // With the real shapes and sizes but no data, for --dry-run and `dtrain plan` when the files
  // are missing; its describe() says it stands in. Null: it needs no files.
  DatasetOpener stand_in{};
  OnDisk on_disk{};
  std::optional<DefaultPath> default_path{};
  // The channels of its samples, which dataset.mean and dataset.std must match; 0: none (token
  // ids, which are not normalised). `channels_from`: its own keys they are read from, whose
  // problems leave them unknown (a bad shape).
  std::function<int(const DatasetConfig&)> channels{};
  std::vector<std::string> channels_from{};
  std::string offers{};  // what it gives the model: samples, classes or vocabulary (README)
  std::optional<Normalization> standard{};  // its statistics: the normalisation by default
  Augmentation augmentation{};
  // Remarks the shared keys' docs make of it: what a sample of train_size is when not a sample
  // ("windows"), what 0 means for a generated split, what its loads decode (why the loader's
  // workers pay off).
  std::string sample_is{};
  std::string train_size_zero{}, test_size_zero{};
  std::string decodes{};
  // The shared key its own keys follow in the section: where they are read (and problems with
  // them reported), written to config.yaml and listed by `dtrain keys`.
  std::string keys_after = "test_size";
  // Why each of its own keys is its own: said when the key is given to another dataset.
  std::map<std::string, std::string> own_key_reasons{};
};

// Every dataset, in the order of the documentation and the messages.
const std::vector<DatasetEntry>& dataset_rows();
// Null when no dataset has that name.
const DatasetEntry* find_dataset(const std::string& name);
std::vector<std::string> dataset_names();
// `name` with every default: its row's options and the shared keys' (dataset.path: its default
// place). InputError for an unknown name.
DatasetConfig dataset_defaults(const std::string& name);

// A row's opener over its options struct: `open(const DatasetConfig&, const Options&, Split,
// seed)`.
template <class Options, class Open>
DatasetOpener opener_of(Open open) {
  return [open](const DatasetConfig& d, Split split, uint64_t seed) {
    return open(d, d.get<Options>(), split, seed);
  };
}

// The table of datasets/README.md: each row's name, summary, files, samples, normalisation
// and augmentation, as Markdown (tests/data checks the README holds it).
std::string datasets_markdown();

}  // namespace dtrain
