// The dataset table and what is derived from it (see dataset_table.h).
#include "data/dataset_table.h"

#include <fmt/format.h>  // fmt::format, fmt::join: the README table

#include "core/error.h"       // DTRAIN_INPUT_CHECK
#include "core/named_rows.h"  // find_row, row_names

namespace dtrain {

// Each dataset's file defines its row (idx.cpp and cifar.cpp two each).
DatasetEntry mnist_dataset();
DatasetEntry fashion_mnist_dataset();
DatasetEntry cifar10_dataset();
DatasetEntry cifar100_dataset();
DatasetEntry imagefolder_dataset();
DatasetEntry synthetic_dataset();
DatasetEntry text_dataset();
DatasetEntry tokens_dataset();

// One row per line, in the order of the documentation and the messages.
const std::vector<DatasetEntry>& dataset_rows() {
  static const std::vector<DatasetEntry> table{
      mnist_dataset(),       fashion_mnist_dataset(), cifar10_dataset(), cifar100_dataset(),
      imagefolder_dataset(), synthetic_dataset(),     text_dataset(),    tokens_dataset(),
  };
  return table;
}

const DatasetEntry* find_dataset(const std::string& name) {
  return find_row(dataset_rows(), &DatasetEntry::name, name);
}

std::vector<std::string> dataset_names() {
  return row_names(dataset_rows(), &DatasetEntry::name);
}

DatasetConfig dataset_defaults(const std::string& name) {
  const DatasetEntry* row = find_dataset(name);
  DTRAIN_INPUT_CHECK(row != nullptr) << "dataset.name: unknown dataset '" << name << "' (expected "
                                     << fmt::format("{}", fmt::join(dataset_names(), " | ")) << ")";
  DatasetConfig d;
  d.name = name;
  d.options = row->keys->defaults();
  if (row->default_path) d.path = row->default_path->path;
  return d;
}

namespace {

// "0.2860" or "(0.4914, 0.4822, 0.4465)": one value per channel.
std::string channel_values(const std::vector<float>& values) {
  std::vector<std::string> shown;
  for (float v : values) shown.push_back(fmt::format("{:.4f}", v));
  const std::string joined = fmt::format("{}", fmt::join(shown, ", "));
  return values.size() == 1 ? joined : "(" + joined + ")";
}

std::string normalisation_of(const DatasetEntry& row) {
  if (row.standard)
    return channel_values(row.standard->mean) + " / " + channel_values(row.standard->std);
  return row.channels(dataset_defaults(row.name)) == 0 ? "none: token ids" : "none";
}

}  // namespace

std::string datasets_markdown() {
  std::string md =
      "| `name` | what it is | under `dataset.path` | samples | normalisation (mean / std) | "
      "`augment: true` |\n| --- | --- | --- | --- | --- | --- |\n";
  for (const DatasetEntry& row : dataset_rows()) {
    std::string on_disk = row.on_disk.kind == OnDisk::Kind::nothing ? "nothing" : row.on_disk.files;
    if (row.default_path)
      on_disk +=
          fmt::format("; default `{}` ({})", row.default_path->path, row.default_path->source);
    const std::string augment =
        row.augmentation.recipe.empty() ? "not offered" : row.augmentation.recipe;
    md += fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", row.name, row.summary, on_disk,
                      row.offers, normalisation_of(row), augment);
  }
  return md;
}

}  // namespace dtrain
