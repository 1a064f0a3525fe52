// CIFAR-10 and CIFAR-100 in their binary distributions (cifar-10-batches-bin, cifar-100-binary):
// two rows of the dataset table that differ in their files, label bytes and statistics.
#include <filesystem>  // path, exists

#include "core/error.h"          // DTRAIN_INPUT_CHECK
#include "data/byte_file.h"      // read_whole_file
#include "data/dataset_table.h"  // DatasetEntry: the rows
#include "data/describe.h"       // describe_dataset
#include "data/in_memory.h"      // InMemoryDataset, ByteImages
#include "data/stand_in.h"       // stand_in_images
#include "data/subset.h"         // requested_samples

namespace dtrain {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kPixels = 3 * 32 * 32;  // R plane, G plane, B plane: already CHW

struct CifarLayout {
  const char* folder;  // the archive's top folder
  std::vector<std::string> train, test;
  int64_t label_bytes;  // CIFAR-100 stores coarse then fine label
  int64_t classes;
  Normalization standard;  // per-channel statistics of the training set
};

// `path` may be the folder with the .bin files or the folder the archive was unpacked into.
fs::path resolve_folder(const fs::path& path, const CifarLayout& layout) {
  const std::string& probe = layout.test.front();
  if (fs::exists(path / probe) || fs::exists(path / layout.train.front())) return path;
  if (fs::is_directory(path / layout.folder)) return path / layout.folder;
  DTRAIN_INPUT_CHECK(false) << "dataset.path: " << path.string() << " holds neither " << probe
                            << " nor a " << layout.folder << "/ folder";
  return {};
}

void append_records(const fs::path& file, const CifarLayout& layout, ByteImages& data) {
  DTRAIN_INPUT_CHECK(fs::is_regular_file(file)) << file.string() << ": missing";
  std::vector<uint8_t> bytes = read_whole_file(file);
  const int64_t record = layout.label_bytes + kPixels;
  const int64_t size = static_cast<int64_t>(bytes.size());
  DTRAIN_INPUT_CHECK(size > 0 && size % record == 0)
      << file.string() << ": " << size << " bytes is not a whole number of " << record
      << "-byte records (" << layout.label_bytes << " label byte(s) + " << kPixels << " pixels)";
  const int64_t n = size / record;
  const size_t offset = data.pixels.size();
  data.pixels.resize(offset + n * kPixels);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* rec = bytes.data() + i * record;
    const int label = rec[layout.label_bytes - 1];  // CIFAR-100: the fine label
    DTRAIN_INPUT_CHECK(label < layout.classes)
        << file.string() << ": label " << label << " of record " << i << " is outside [0, "
        << layout.classes << ")";
    data.labels.push_back(label);
    std::copy(rec + layout.label_bytes, rec + record, data.pixels.begin() + offset + i * kPixels);
  }
}

std::unique_ptr<Dataset> open_cifar(const DatasetConfig& config, Split split, uint64_t seed,
                                    const CifarLayout& layout) {
  const fs::path folder = resolve_folder(config.path, layout);
  ByteImages data;
  data.shape = Shape{3, 32, 32};
  for (const std::string& name : split == Split::train ? layout.train : layout.test) {
    append_records(folder / name, layout, data);
  }
  data.truncate(requested_samples(config, split, data.size(), folder.string()));

  std::optional<PadCropFlip> augment;
  if (config.augment && split == Split::train) augment = PadCropFlip{4, true};
  std::string description = describe_dataset(config.name, split, data.size(), data.shape,
                                             layout.classes, folder.string());
  return std::make_unique<InMemoryDataset>(std::move(data), layout.classes,
                                           resolve_normalization(config, 3, layout.standard),
                                           augment, seed, std::move(description));
}

DatasetEntry cifar_row(std::string name, std::string summary, CifarLayout layout,
                       std::string files) {
  const int64_t classes = layout.classes;
  return {
      .name = name,
      .summary = std::move(summary),
      .keys = config::erase(config::Schema<NoOptions>(name)),
      .open = [layout](const DatasetConfig& d, Split split,
                       uint64_t seed) { return open_cifar(d, split, seed, layout); },
      .stand_in =
          [classes](const DatasetConfig& d, Split split, uint64_t seed) {
            return stand_in_images(d, split, seed, {Shape{3, 32, 32}, classes, 50000, 10000});
          },
      .on_disk = OnDisk::folder(std::move(files)),
      .channels = [](const DatasetConfig&) { return 3; },
      .offers = "[3, 32, 32] colour images, " + std::to_string(classes) + " classes",
      .standard = layout.standard,
      .augmentation = {"pad 4, random 32 × 32 crop, horizontal flip", true},
  };
}

}  // namespace

DatasetEntry cifar10_dataset() {
  return cifar_row("cifar10", "32 × 32 colour images in 10 classes (Krizhevsky 2009)",
                   {"cifar-10-batches-bin",
                    {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                     "data_batch_5.bin"},
                    {"test_batch.bin"},
                    1,
                    10,
                    {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}}},
                   "`data_batch_1.bin` … `data_batch_5.bin`, `test_batch.bin` (or their "
                   "`cifar-10-batches-bin/`)");
}

DatasetEntry cifar100_dataset() {
  // Its records hold the coarse label, then the fine one the rows train on.
  return cifar_row("cifar100", "32 × 32 colour images in 100 fine classes (Krizhevsky 2009)",
                   {"cifar-100-binary",
                    {"train.bin"},
                    {"test.bin"},
                    2,
                    100,
                    {{0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}}},
                   "`train.bin`, `test.bin` (or their `cifar-100-binary/`)");
}

}  // namespace dtrain
