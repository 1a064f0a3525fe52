// DatasetConfig: the `dataset:` section of an experiment, read once (dataset_section.h): the
// keys every dataset shares, and in `options` the chosen dataset's own keys — the options struct
// its row of the dataset table declares (dataset_table.h), nothing of any other dataset.
#pragma once
#include <any>      // options: the chosen dataset's own struct
#include <cstdint>  // int64_t
#include <string>
#include <vector>

#include "core/error.h"  // DTRAIN_CHECK

namespace dtrain {

struct DatasetConfig {
  std::string name;      // a row of the dataset table
  std::string path;      // where its files are (a folder, or the file); none for generated data
  int batch_size = 100;  // GLOBAL batch, split evenly over data-parallel ranks
  int test_batch_size = 100;  // defaults to batch_size
  // 0: the whole split (a generated dataset: its own size); N: the first N samples (windows).
  int64_t train_size = 0;
  int64_t test_size = 0;
  bool augment = false;  // training split only: the row's recipe of random crops and flips
  int prefetch = 2;      // batches the loader prepares ahead of the compute thread
  int workers = 1;       // threads preparing one batch together (JPEG decoding, a fast GPU)
  std::any options;      // the row's options struct (SyntheticOptions, TextOptions, ...)
  // Per-channel normalisation; empty means the dataset's standard values. `std` is declared
  // last so that no later declaration in this struct sees the member instead of namespace std.
  std::vector<double> mean;
  std::vector<double> std;

  template <class T>
  const T& get() const {
    const T* o = std::any_cast<T>(&options);
    DTRAIN_CHECK(o != nullptr) << "dataset '" << name << "' has other options";
    return *o;
  }
  template <class T>
  T& get() {
    T* o = std::any_cast<T>(&options);
    DTRAIN_CHECK(o != nullptr) << "dataset '" << name << "' has other options";
    return *o;
  }
  // The same keys with the same values (the row's as its schema writes them).
  bool operator==(const DatasetConfig& other) const;
};

}  // namespace dtrain
