// Dataset: the samples of one split (train or test) of a dataset, each produced on demand: an
// image classifier's normalised float CHW image and label, or a language model's window of
// token ids and the next tokens. open_dataset opens the one the `dataset:` section names,
// through its row of the dataset table (dataset_table.h).
#pragma once
#include <cstdint>  // int64_t, int32_t, uint64_t
#include <memory>   // unique_ptr: open_dataset's result
#include <string>
#include <string_view>
#include <vector>

#include "core/shape.h"           // Shape: the per-sample [C, H, W]
#include "data/dataset_config.h"  // DatasetConfig: the `dataset:` section

namespace dtrain {

enum class Split { train, test };

constexpr std::string_view split_name(Split s) {
  return s == Split::train ? "train" : "test";
}

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
  // One line: "NAME train: 60000 × [1, 28, 28], 10 classes (FOLDER)" (describe.h).
  virtual std::string describe() const = 0;
};

// Opens a split with its row's opener (`seed` draws generated contents and augmentation);
// every problem with the options or the files is an InputError naming the key or the file and
// what was expected (a missing folder points at datasets/README.md).
std::unique_ptr<Dataset> open_dataset(const DatasetConfig& config, Split split, uint64_t seed = 1);

// True when the dataset is one read from files (its row's on_disk) and dataset.path is absent or
// an empty folder.
bool dataset_files_missing(const DatasetConfig& config);

// For what needs a dataset's shapes but not its data (--dry-run, dtrain plan): its row's
// stand-in, with the dataset's own sample shape, classes or vocabulary and split sizes, and a
// describe() that says it stands in. InputError for a dataset that needs no files.
std::unique_ptr<Dataset> open_stand_in(const DatasetConfig& config, Split split, uint64_t seed = 1);

}  // namespace dtrain
