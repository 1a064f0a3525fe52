// open_dataset, dataset_files_missing and open_stand_in: what every dataset shares, the rest
// asked of its row of the dataset table.
#include "data/dataset.h"

#include <fmt/format.h>  // fmt::join: the names in messages

#include <filesystem>  // exists, is_directory

#include "core/error.h"          // DTRAIN_INPUT_CHECK
#include "data/dataset_table.h"  // find_dataset, dataset_names

namespace dtrain {

namespace {

const DatasetEntry& row_of(const DatasetConfig& config) {
  const DatasetEntry* row = find_dataset(config.name);
  DTRAIN_INPUT_CHECK(row != nullptr)
      << "dataset.name: unknown dataset '" << config.name << "' (expected "
      << fmt::format("{}", fmt::join(dataset_names(), " | ")) << ")";
  return *row;
}

}  // namespace

bool dataset_files_missing(const DatasetConfig& config) {
  const OnDisk::Kind kind = row_of(config).on_disk.kind;
  if (kind == OnDisk::Kind::nothing) return false;
  std::error_code ec;
  if (config.path.empty() || !std::filesystem::exists(config.path, ec)) return true;
  if (kind == OnDisk::Kind::file) return false;  // its opener judges the file
  return std::filesystem::is_directory(config.path, ec) &&
         std::filesystem::is_empty(config.path, ec);
}

std::unique_ptr<Dataset> open_stand_in(const DatasetConfig& config, Split split, uint64_t seed) {
  const DatasetEntry& row = row_of(config);
  DTRAIN_INPUT_CHECK(row.stand_in != nullptr)
      << "dataset.name: no stand-in for '" << config.name << "'";
  return row.stand_in(config, split, seed);
}

std::unique_ptr<Dataset> open_dataset(const DatasetConfig& config, Split split, uint64_t seed) {
  const DatasetEntry& row = row_of(config);
  // A folder is judged here, for every dataset alike; a file by its opener, which knows what it
  // should hold.
  if (row.on_disk.kind == OnDisk::Kind::folder) {
    DTRAIN_INPUT_CHECK(!config.path.empty()) << "dataset.path: required for " << config.name;
    DTRAIN_INPUT_CHECK(std::filesystem::exists(config.path))
        << "dataset.path: " << config.path << " does not exist (datasets/README.md says how to "
        << "obtain " << config.name << ")";
    DTRAIN_INPUT_CHECK(std::filesystem::is_directory(config.path))
        << "dataset.path: " << config.path << " is not a folder";
  }
  return row.open(config, split, seed);
}

}  // namespace dtrain
