// Loader: turns a Dataset into this rank's batches of each epoch — shuffled identically on every
// rank, each global batch split into contiguous per-rank slices — prepared ahead on a background
// thread into a small ring of reused buffers.
#pragma once
#include <cstdint>  // int64_t, uint64_t
#include <memory>   // unique_ptr: the thread and buffers live behind the interface
#include <string>   // the thread's trace name

#include "backend/backend.h"  // Backend: batches uploaded to its device
#include "core/tensor.h"      // Tensor: the batch's images and labels
#include "data/dataset.h"     // Dataset

namespace dtrain {

struct LoaderOptions {
  int64_t global_batch = 100;
  int rank = 0, world = 1;  // data-parallel position
  uint64_t seed = 1;
  bool shuffle = true;    // train: true; evaluation: false
  bool drop_last = true;  // train: true (as the papers); evaluation: false (every test sample once)
  int prefetch = 2;       // batches prepared ahead on a background thread; 0 = load synchronously
  // Threads decoding one batch together. Pays off for image folders (JPEG decoding, ~5 ms an
  // image); in-memory datasets convert a sample in microseconds and want 1.
  int workers = 1;
  // Memory of the batch buffers: the backend's host allocator, which is pinned for a GPU so
  // that uploads are asynchronous. Null: plain host memory.
  Allocator* allocator = nullptr;
  // When set to a GPU backend, the loader's thread also uploads each batch to the device (on a
  // stream of its own, overlapping compute) and next() returns device tensors.
  Backend* device = nullptr;
  std::string trace_name = "loader";  // the background thread's name in trace.json
};

struct Batch {
  // f32 [local_rows, C, H, W] (a sequence: [local_rows, T] token ids) on the host, or on
  // LoaderOptions::device
  Tensor images;
  Tensor labels;      // i32 [local_rows] + Dataset::label_shape() ([local_rows, T]), likewise
  int64_t index = 0;  // batch number within the epoch
  // The batch's samples (not labels.numel(): a sequence has T labels a sample).
  int64_t rows() const { return labels.shape()[0]; }
};

class Loader {
 public:
  // `dataset` must outlive the loader. InputError if global_batch % world != 0 or no batch can be
  // formed (e.g. drop_last with fewer samples than global_batch).
  Loader(const Dataset& dataset, const LoaderOptions& options);
  ~Loader();  // stops the background thread, also mid-epoch
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int64_t batches_per_epoch() const;
  int64_t local_batch() const;  // global_batch / world: the most rows next() returns
  // Begins `epoch` at its batch `first` (a resumed run skips what it trained; nothing of the
  // skipped batches is loaded), discarding what is left of the previous epoch.
  void start_epoch(int64_t epoch, int64_t first = 0);
  // Next batch of the epoch, or false at its end. Every rank returns the same number of batches
  // (with drop_last=false a rank may get 0 rows of the last one). The tensors stay valid until
  // the next call of next() or start_epoch(); device tensors may be overwritten by a later
  // upload after that, so the device work reading them must be complete by then (the
  // schedulers and the evaluation read the loss, which synchronises, every batch).
  // Rethrows a failure of the background thread.
  bool next(Batch& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain
