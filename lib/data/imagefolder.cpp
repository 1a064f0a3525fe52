// The image folder: its row of the dataset table and its opener (see imagefolder.h).
#include "data/imagefolder.h"

#include "core/error.h"          // DTRAIN_INPUT_CHECK, DTRAIN_CHECK, Error
#include "data/dataset_table.h"  // DatasetEntry: its row
#include "data/stand_in.h"       // stand_in_images

#ifdef DTRAIN_HAS_OPENCV
#include <dlfcn.h>  // dlsym, dlclose

#include <algorithm>   // sort
#include <cctype>      // tolower
#include <filesystem>  // directory_iterator
#include <set>
#include <string>
#include <vector>

#include "core/plugin_path.h"    // open_plugin: libdtrain_image.so, wherever it is
#include "core/rng.h"            // random_bits: crop offsets and flips
#include "data/describe.h"       // describe_dataset
#include "data/image_decoder.h"  // the plugin's C interface
#include "data/subset.h"         // requested_samples
#endif

namespace dtrain {

namespace {

// ImageNet's statistics (torchvision's): the normalisation by default.
Normalization imagenet_statistics() {
  return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
}
// ImageNet's classes and split sizes: the stand-in's.
constexpr int64_t kImageNetClasses = 1000, kImageNetTrain = 1281167, kImageNetVal = 50000;

#ifndef DTRAIN_HAS_OPENCV

std::unique_ptr<Dataset> open_imagefolder(const DatasetConfig&, const ImageFolderOptions&, Split,
                                          uint64_t) {
  DTRAIN_INPUT_CHECK(false) << "dataset.name: imagefolder needs OpenCV, but dtrain was built "
                               "without it (DTRAIN_OPENCV=OFF)";
  return nullptr;
}

#else

namespace fs = std::filesystem;

// The image decoder plugin (data/image_decoder.h): OpenCV, loaded when the first image folder is
// opened rather than linked, so that no other run maps it.
struct ImageDecoder {
  decltype(&dtrain_image_decode) decode = nullptr;
  decltype(&dtrain_image_error) error = nullptr;
  decltype(&dtrain_image_set_threads) set_threads = nullptr;
};

constexpr const char* kDecoderFile = "libdtrain_image.so";
#ifdef DTRAIN_IMAGE_PLUGIN_BUILD_PATH
constexpr const char* kDecoderBuildPath = DTRAIN_IMAGE_PLUGIN_BUILD_PATH;  // the build tree's
#else
constexpr const char* kDecoderBuildPath = "";
#endif

// The plugin's entry points, or why it cannot be used.
struct LoadedDecoder {
  ImageDecoder decoder;
  std::string error;
};

LoadedDecoder load_decoder() {
  LoadedDecoder loaded;
  const OpenedPlugin plugin =
      open_plugin(kDecoderFile, kDecoderBuildPath, "the image decoder plugin");
  if (!plugin.handle) {
    loaded.error = plugin.error;
    return loaded;
  }
  using AbiFunction = decltype(&dtrain_image_abi);
  const auto abi = reinterpret_cast<AbiFunction>(dlsym(plugin.handle, "dtrain_image_abi"));
  if (!abi || abi() != DTRAIN_IMAGE_ABI) {
    loaded.error = "the image decoder plugin " + plugin.path +
                   " belongs to another build of dtrain (ABI " +
                   (abi ? std::to_string(abi()) : std::string("unknown")) + ", this dtrain's " +
                   std::to_string(DTRAIN_IMAGE_ABI) + ")";
    dlclose(plugin.handle);
    return loaded;
  }
  ImageDecoder& d = loaded.decoder;
  d.decode = reinterpret_cast<decltype(d.decode)>(dlsym(plugin.handle, "dtrain_image_decode"));
  d.error = reinterpret_cast<decltype(d.error)>(dlsym(plugin.handle, "dtrain_image_error"));
  d.set_threads =
      reinterpret_cast<decltype(d.set_threads)>(dlsym(plugin.handle, "dtrain_image_set_threads"));
  if (!d.decode || !d.error || !d.set_threads) {
    loaded.error = "the image decoder plugin " + plugin.path +
                   " lacks dtrain_image_decode, dtrain_image_error or dtrain_image_set_threads";
    loaded.decoder = {};
  }
  return loaded;  // never unloaded: the loader's threads keep buffers of the plugin's
}

// The plugin, loaded on the first call (once: loading is neither cheap nor undone); a missing or
// broken plugin is an installation problem, not a bad input: Error (exit 1).
const ImageDecoder& image_decoder() {
  static const LoadedDecoder loaded = load_decoder();
  if (!loaded.error.empty()) throw Error("dataset.name: imagefolder: " + loaded.error);
  return loaded.decoder;
}

struct Sample {
  std::string file;
  int32_t label;
};

bool is_image(const fs::path& p) {
  static const std::set<std::string> kExtensions = {".jpg", ".jpeg", ".png",  ".bmp", ".ppm",
                                                    ".pgm", ".tif",  ".tiff", ".webp"};
  std::string ext = p.extension().string();
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return kExtensions.count(ext) > 0;
}

std::vector<std::string> sorted_subfolders(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_directory()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

fs::path split_folder(const fs::path& root, Split split) {
  if (split == Split::train) {
    DTRAIN_INPUT_CHECK(fs::is_directory(root / "train"))
        << "dataset.path: " << root.string()
        << " has no train/ folder (imagefolder expects <path>/train/<class>/<image>)";
    return root / "train";
  }
  for (const char* name : {"val", "test"}) {
    if (fs::is_directory(root / name)) return root / name;
  }
  DTRAIN_INPUT_CHECK(false) << "dataset.path: " << root.string()
                            << " has neither a val/ nor a test/ folder (imagefolder expects "
                               "<path>/val/<class>/<image>)";
  return {};
}

// Every image of `dir`, labelled by the index of its class folder in `classes`: the train
// folder's classes, so that both splits number the classes the same way.
std::vector<Sample> list_samples(const fs::path& dir, const std::vector<std::string>& classes) {
  std::vector<Sample> samples;
  for (const std::string& name : sorted_subfolders(dir)) {
    auto it = std::lower_bound(classes.begin(), classes.end(), name);
    DTRAIN_INPUT_CHECK(it != classes.end() && *it == name)
        << (dir / name).string() << ": class folder not present in the train split";
    const int32_t label = static_cast<int32_t>(it - classes.begin());
    std::vector<std::string> files;
    for (const fs::directory_entry& e : fs::directory_iterator(dir / name)) {
      if (e.is_regular_file() && is_image(e.path())) files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    for (std::string& f : files) samples.push_back({std::move(f), label});
  }
  return samples;
}

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(const ImageDecoder& decoder, std::vector<Sample> samples, int64_t classes,
                     int64_t image_size, int64_t resize, bool augment, const Normalization& norm,
                     uint64_t seed, std::string description)
      : decoder_(decoder),
        samples_(std::move(samples)),
        classes_(classes),
        image_size_(image_size),
        resize_(resize),
        augment_(augment),
        lut_(norm),
        seed_(seed),
        description_(std::move(description)) {}

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  Shape sample_shape() const override { return Shape{3, image_size_, image_size_}; }
  int64_t num_classes() const override { return classes_; }
  std::string describe() const override { return description_; }

  int32_t load(int64_t index, float* out, int64_t epoch) const override {
    DTRAIN_CHECK(index >= 0 && index < size()) << "sample " << index << " of " << size();
    const Sample& sample = samples_[index];
    // Shorter side → resize_, aspect kept; 8-bit BGR, grey expanded.
    DtrainImage resized{};
    const int status = decoder_.decode(sample.file.c_str(), static_cast<int>(resize_), &resized);
    // A bad input file (exit 2), like a truncated idx file: the user can fix or remove it.
    DTRAIN_INPUT_CHECK(status != DTRAIN_IMAGE_UNREADABLE)
        << sample.file << ": cannot read or decode the image (corrupt, truncated or not an image)";
    DTRAIN_CHECK(status == DTRAIN_IMAGE_OK) << sample.file << ": " << decoder_.error();
    const int rows = resized.rows, cols = resized.cols;

    const int64_t S = image_size_;
    int64_t y0 = (rows - S) / 2, x0 = (cols - S) / 2;
    bool flip = false;
    if (augment_) {
      uint64_t bits = random_bits(seed_, stream_id(RngStream::augment, epoch), index);
      y0 = static_cast<int64_t>((bits & 0xffffff) % static_cast<uint64_t>(rows - S + 1));
      x0 = static_cast<int64_t>(((bits >> 24) & 0xffffff) % static_cast<uint64_t>(cols - S + 1));
      flip = (bits >> 63) & 1;
    }
    // HWC BGR bytes → CHW RGB floats.
    const float* lut_r = lut_.channel(0);
    const float* lut_g = lut_.channel(1);
    const float* lut_b = lut_.channel(2);
    float* out_r = out;
    float* out_g = out + S * S;
    float* out_b = out + 2 * S * S;
    for (int64_t y = 0; y < S; ++y) {
      const uint8_t* row = resized.pixels + static_cast<size_t>(y0 + y) * resized.step + 3 * x0;
      for (int64_t x = 0; x < S; ++x) {
        const uint8_t* px = row + 3 * (flip ? S - 1 - x : x);
        out_r[y * S + x] = lut_r[px[2]];
        out_g[y * S + x] = lut_g[px[1]];
        out_b[y * S + x] = lut_b[px[0]];
      }
    }
    return sample.label;
  }

 private:
  const ImageDecoder& decoder_;  // the plugin's, loaded for good
  std::vector<Sample> samples_;
  int64_t classes_, image_size_, resize_;
  bool augment_;
  ByteLut lut_;
  uint64_t seed_;
  std::string description_;
};

std::unique_ptr<Dataset> open_imagefolder(const DatasetConfig& config,
                                          const ImageFolderOptions& options, Split split,
                                          uint64_t seed) {
  DTRAIN_INPUT_CHECK(options.image_size > 0)
      << "dataset.image_size: " << options.image_size << " is not > 0";
  DTRAIN_INPUT_CHECK(options.resize >= options.image_size)
      << "dataset.resize: " << options.resize << " is smaller than dataset.image_size "
      << options.image_size << " (the crop must fit in the resized image)";
  const fs::path root = config.path;
  const fs::path dir = split_folder(root, split);
  // Class numbering comes from train/ when it exists, so that a test-only copy still agrees.
  const fs::path class_dir = fs::is_directory(root / "train") ? root / "train" : dir;
  const std::vector<std::string> classes = sorted_subfolders(class_dir);
  DTRAIN_INPUT_CHECK(!classes.empty()) << class_dir.string() << ": no class folders (expected "
                                       << class_dir.string() << "/<class>/<image>)";
  std::vector<Sample> samples = list_samples(dir, classes);
  DTRAIN_INPUT_CHECK(!samples.empty())
      << dir.string() << ": no images (.jpg, .jpeg, .png, .bmp, .ppm, .pgm, .tif, .tiff, .webp) "
      << "in its class folders";

  // A subset keeps every k-th image rather than the first N: the list is sorted by class, and the
  // first N would be the first few classes only.
  const int64_t total = static_cast<int64_t>(samples.size());
  const int64_t n = requested_samples(config, split, total, dir.string());
  if (n < total) {
    std::vector<Sample> subset;
    subset.reserve(n);
    for (int64_t i = 0; i < n; ++i) subset.push_back(std::move(samples[i * total / n]));
    samples = std::move(subset);
  }

  // Decoding runs on the loader's threads; OpenCV's own pool inside each resize would only
  // oversubscribe the cores.
  const ImageDecoder& decoder = image_decoder();
  decoder.set_threads(1);
  const int64_t classes_count = static_cast<int64_t>(classes.size());
  std::string description = describe_dataset(
      config.name, split, static_cast<int64_t>(samples.size()),
      Shape{3, options.image_size, options.image_size}, classes_count, dir.string());
  return std::make_unique<ImageFolderDataset>(
      decoder, std::move(samples), classes_count, options.image_size, options.resize,
      config.augment && split == Split::train,
      resolve_normalization(config, 3, imagenet_statistics()), seed, std::move(description));
}

#endif  // DTRAIN_HAS_OPENCV

std::unique_ptr<Dataset> imagefolder_stand_in(const DatasetConfig& config,
                                              const ImageFolderOptions& options, Split split,
                                              uint64_t seed) {
  const RealImages imagenet{Shape{3, options.image_size, options.image_size}, kImageNetClasses,
                            kImageNetTrain, kImageNetVal, " (as ImageNet)"};
  return stand_in_images(config, split, seed, imagenet);
}

config::Schema<ImageFolderOptions> imagefolder_schema() {
  using namespace config;
  return Schema<ImageFolderOptions>("imagefolder")
      .key("image_size", &ImageFolderOptions::image_size, integer(Bounds::above(0)),
           "side of the (centre or random) crop")
      .key("resize", &ImageFolderOptions::resize, integer(Bounds::above(0)),
           "shorter side after resizing, before cropping");
}

}  // namespace

DatasetEntry imagefolder_dataset() {
  return {
      .name = "imagefolder",
      .summary =
          "a folder of images, one subfolder per class (torchvision's ImageFolder "
          "layout; ImageNet)",
      .keys = config::erase(imagefolder_schema()),
      .open = opener_of<ImageFolderOptions>(open_imagefolder),
      .stand_in = opener_of<ImageFolderOptions>(imagefolder_stand_in),
      .on_disk = OnDisk::folder("`train/<class>/<image>`, `val/<class>/<image>` (or `test/`)"),
      .channels = [](const DatasetConfig&) { return 3; },
      .offers =
          "[3, image_size, image_size] colour images; the classes are the folders of "
          "`train/`",
      .standard = imagenet_statistics(),
      .augmentation = {"random image_size crop of the resized image, horizontal flip", true},
      .decodes = "JPEGs",
  };
}

}  // namespace dtrain
