// Dataset: the samples of one split (train or test) of a dataset, each produced on demand: an
// image classifier's normalised float CHW image and label, or a language model's window of
// token ids and the next tokens. open_dataset picks the format from the `dataset:` section of
// the config.
#pragma once
#include <cstdint>  // int64_t, int32_t, uint64_t
#include <memory>   // unique_ptr: open_dataset's result
#include <string>
#include <string_view>
#include <vector>

#include "core/shape.h"  // Shape: the per-sample [C, H, W]

namespace dtrain {

enum class Split { train, test };

constexpr std::string_view split_name(Split s) {
  return s == Split::train ? "train" : "test";
}

// Mirrors the `dataset:` section of the config (batch_size belongs to the Loader).
struct DatasetOptions {
  // mnist | fashion_mnist | cifar10 | cifar100 | imagefolder | synthetic | text | tokens
  std::string name;
  std::string path;                       // folder (text: the file; not used by synthetic)
  std::vector<int64_t> shape{1, 28, 28};  // synthetic: [C, H, W]
  int64_t classes = 10;                   // synthetic
  // synthetic: sizes (0 → 1024 / 256); others: 0 = whole split, N = first N samples (text,
  // tokens: windows).
  int64_t train_size = 0, test_size = 0;
  // text, tokens: tokens per sample (the model's context); 0 is refused (required).
  int64_t block_size = 0;
  // text: byte (ids = the file's bytes, 256) | char (ids = the file's distinct Unicode code
  // points, sorted; the file must be UTF-8).
  std::string tokenizer = "byte";
  double valid_fraction = 0.1;  // text: the file's last tokens that are the test split
  int64_t vocab_size = 50257;   // tokens: ids are < vocab_size (GPT-2's 50257)
  // imagefolder: resize the shorter side to `resize`, then crop image_size × image_size.
  int64_t image_size = 224, resize = 256;
  // Train split only: random crop + horizontal flip (imagefolder: random crop of image_size after
  // the resize; cifar: pad 4 + random 32 crop + flip; fashion_mnist: pad 2 + crop + flip;
  // mnist: pad 2 + crop, no flip since mirrored digits are other symbols; synthetic: none).
  bool augment = false;
  // Per-channel normalisation after scaling to [0, 1]; empty → the dataset's standard values.
  std::vector<float> mean, std;
  uint64_t seed = 1;  // synthetic contents and augmentation draws
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Shape sample_shape() const = 0;  // [C, H, W]
  virtual int64_t num_classes() const = 0;
  // Thread-safe. Writes sample `index` as normalised float CHW into `out` and returns its label.
  // `epoch` lets augmentation differ per epoch yet stay deterministic (counter RNG).
  virtual int32_t load(int64_t index, float* out, int64_t epoch) const = 0;
  // Labels per sample: {} — one class (image classification) — or {T} — a class per position
  // (a language model's next tokens; the sample is then T token ids as f32, see ops.h).
  virtual Shape label_shape() const { return {}; }
  // Thread-safe. Writes sample `index` into `out` and its label_shape().numel() labels into
  // `labels`. The default is load()'s one label.
  virtual void load_sample(int64_t index, float* out, int32_t* labels, int64_t epoch) const {
    labels[0] = load(index, out, epoch);
  }
  // The id → token table a run keeps beside its weights when the ids depend on the data (the
  // char tokenizer's sorted characters), as the text of vocab.json; empty when they do not.
  virtual std::string vocabulary_json() const { return {}; }
  // One line: "fashion_mnist train: 60000 × [1, 28, 28], 10 classes (/usr/share/...)".
  virtual std::string describe() const = 0;
};

// Opens a split; every problem with the options or the files is an InputError naming the key or
// the file and what was expected (a missing folder points at datasets/README.md).
std::unique_ptr<Dataset> open_dataset(const DatasetOptions& options, Split split);

// True when the dataset is one read from files and its folder (text: its file) is absent or an
// empty folder.
bool dataset_files_missing(const DatasetOptions& options);

// For what needs a dataset's shapes but not its data (--dry-run, dtrain plan): synthetic images
// with the dataset's own sample shape, classes and split sizes — mnist and fashion_mnist
// (1×28×28, 10 classes), cifar10 / cifar100 (3×32×32, 10 / 100), imagefolder (3 × image_size²,
// 1000 classes, as ImageNet), text (windows of random ids, sized as the King James Bible; 256
// ids — for the char tokenizer a guess, said in describe()), tokens (vocab_size ids, sized as
// OpenWebText). Its describe() says it stands in. InputError for other names.
std::unique_ptr<Dataset> open_stand_in(const DatasetOptions& options, Split split);

}  // namespace dtrain
