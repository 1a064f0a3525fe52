// MNIST and Fashion-MNIST in the idx format (train-images-idx3-ubyte[.gz] etc.): two rows of
// the dataset table that differ only in their statistics, their flips and where Debian puts
// Fashion-MNIST.
#include <filesystem>  // path

#include "core/error.h"          // DTRAIN_INPUT_CHECK
#include "data/byte_file.h"      // read_whole_file, find_first_file
#include "data/dataset_table.h"  // DatasetEntry: the rows
#include "data/describe.h"       // describe_dataset
#include "data/in_memory.h"      // InMemoryDataset, ByteImages
#include "data/stand_in.h"       // stand_in_images
#include "data/subset.h"         // requested_samples

namespace dtrain {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
constexpr int64_t kClasses = 10;

uint32_t big_endian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// `stem` as distributed (train-images-idx3-ubyte) or with LeCun's site's dot spelling
// (train-images.idx3-ubyte), plain or gzip-compressed.
fs::path find_idx_file(const fs::path& dir, const std::string& kind, const std::string& suffix) {
  std::string dash = kind + "-" + suffix, dot = kind + "." + suffix;
  fs::path p = find_first_file(dir, {dash, dash + ".gz", dot, dot + ".gz"});
  DTRAIN_INPUT_CHECK(!p.empty()) << "dataset.path: " << dir.string() << " holds no " << dash
                                 << "[.gz] (expected the idx files of MNIST / Fashion-MNIST)";
  return p;
}

// Checks magic, header and exact length; returns the dimensions and drops the header.
std::vector<int64_t> parse_idx(std::vector<uint8_t>& bytes, const fs::path& file, uint32_t magic,
                               int dims) {
  const int64_t header = 4 + 4 * dims;
  const int64_t got = static_cast<int64_t>(bytes.size());
  DTRAIN_INPUT_CHECK(got >= header) << file.string() << ": truncated: expected at least " << header
                                    << " bytes (the idx header), got " << got;
  uint32_t found = big_endian32(bytes.data());
  DTRAIN_INPUT_CHECK(found == magic)
      << file.string() << ": wrong magic number " << found << ", expected " << magic << " (idx"
      << dims << " unsigned bytes: " << (dims == 3 ? "images" : "labels") << ")";
  std::vector<int64_t> shape;
  int64_t expected = 1;  // payload bytes, then + header; a lying header may overflow
  bool overflow = false;
  for (int d = 0; d < dims; ++d) {
    shape.push_back(big_endian32(bytes.data() + 4 + 4 * d));
    DTRAIN_INPUT_CHECK(shape.back() > 0) << file.string() << ": dimension " << d << " is 0";
    overflow = overflow || __builtin_mul_overflow(expected, shape.back(), &expected);
  }
  overflow = overflow || __builtin_add_overflow(expected, header, &expected);
  DTRAIN_INPUT_CHECK(!overflow) << file.string() << ": header promises more than 2^63 bytes";
  DTRAIN_INPUT_CHECK(got >= expected)
      << file.string() << ": truncated: expected " << expected << " bytes, got " << got;
  DTRAIN_INPUT_CHECK(got == expected)
      << file.string() << ": expected " << expected << " bytes as its header promises, got " << got
      << " (trailing data)";
  bytes.erase(bytes.begin(), bytes.begin() + header);
  return shape;
}

// What both rows are made of: `standard` is the training set's published statistics.
struct IdxLayout {
  Normalization standard;
  Augmentation augmentation;
};

// The split from the four files in dataset.path.
std::unique_ptr<Dataset> open_idx(const DatasetConfig& config, Split split, uint64_t seed,
                                  const IdxLayout& layout) {
  const fs::path dir = config.path;
  const std::string kind = split == Split::train ? "train" : "t10k";
  const fs::path images_file = find_idx_file(dir, kind + "-images", "idx3-ubyte");
  const fs::path labels_file = find_idx_file(dir, kind + "-labels", "idx1-ubyte");

  ByteImages data;
  data.pixels = read_whole_file(images_file);
  std::vector<int64_t> image_dims = parse_idx(data.pixels, images_file, kImagesMagic, 3);
  data.shape = Shape{1, image_dims[1], image_dims[2]};

  std::vector<uint8_t> labels = read_whole_file(labels_file);
  std::vector<int64_t> label_dims = parse_idx(labels, labels_file, kLabelsMagic, 1);
  DTRAIN_INPUT_CHECK(label_dims[0] == image_dims[0])
      << labels_file.string() << " holds " << label_dims[0] << " labels but "
      << images_file.string() << " holds " << image_dims[0] << " images";
  data.labels.resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    DTRAIN_INPUT_CHECK(labels[i] < kClasses)
        << labels_file.string() << ": label " << int{labels[i]} << " of sample " << i
        << " is outside [0, " << kClasses << ")";
    data.labels[i] = labels[i];
  }

  data.truncate(requested_samples(config, split, data.size(), images_file.string()));

  std::optional<PadCropFlip> augment;
  if (config.augment && split == Split::train) augment = PadCropFlip{2, layout.augmentation.flips};
  std::string description =
      describe_dataset(config.name, split, data.size(), data.shape, kClasses, dir.string());
  return std::make_unique<InMemoryDataset>(std::move(data), kClasses,
                                           resolve_normalization(config, 1, layout.standard),
                                           augment, seed, std::move(description));
}

DatasetEntry idx_row(std::string name, std::string summary, IdxLayout layout,
                     std::optional<DefaultPath> default_path = std::nullopt) {
  return {
      .name = name,
      .summary = std::move(summary),
      .keys = config::erase(config::Schema<NoOptions>(name)),
      .open = [layout](const DatasetConfig& d, Split split,
                       uint64_t seed) { return open_idx(d, split, seed, layout); },
      .stand_in =
          [](const DatasetConfig& d, Split split, uint64_t seed) {
            return stand_in_images(d, split, seed, {Shape{1, 28, 28}, kClasses, 60000, 10000});
          },
      .on_disk = OnDisk::folder(
          "`train-images-idx3-ubyte[.gz]`, `train-labels-idx1-ubyte[.gz]`, `t10k-…` (or the "
          "dotted spelling `train-images.idx3-ubyte`)"),
      .default_path = std::move(default_path),
      .channels = [](const DatasetConfig&) { return 1; },
      .offers = "[1, 28, 28] grey images, 10 classes",
      .standard = layout.standard,
      .augmentation = layout.augmentation,
  };
}

}  // namespace

DatasetEntry mnist_dataset() {
  // Mirrored digits are other symbols (or none): no flip.
  return idx_row("mnist", "handwritten digits (LeCun et al. 1998): 60000 training, 10000 test",
                 {{{0.1307f}, {0.3081f}}, {"pad 2, random 28 × 28 crop (no flip)", false}});
}

DatasetEntry fashion_mnist_dataset() {
  // Mirrored clothes are still the same clothes.
  return idx_row("fashion_mnist",
                 "Zalando's clothes (Xiao et al. 2017), MNIST's format and sizes: the default "
                 "experiments' data",
                 {{{0.2860f}, {0.3530f}}, {"pad 2, random 28 × 28 crop, horizontal flip", true}},
                 DefaultPath{"/usr/share/datasets/fashion-mnist", "Debian's package"});
}

}  // namespace dtrain
