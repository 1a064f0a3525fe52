#include "data/loader.h"

#include <algorithm>           // min
#include <atomic>              // generation read by filling threads without the lock
#include <condition_variable>  // producer and consumer sleep until there is work
#include <deque>
#include <exception>  // exception_ptr: background failures rethrown by next()
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"     // DTRAIN_INPUT_CHECK, DTRAIN_CHECK
#include "core/phase.h"     // TraceScope: a batch is a load span of the loader's thread
#include "core/trace.h"     // the thread's trace track
#include "data/sharding.h"  // epoch_order, rank_rows, count_batches

namespace dtrain {

namespace {

// One preallocated batch buffer of the ring (ImageNet: 150 MB; allocated once, reused).
struct Slot {
  Tensor images, labels;                // host (pinned for a GPU)
  Tensor device_images, device_labels;  // LoaderOptions::device's copies
  int64_t index = -1, rows = 0;
};

}  // namespace

// Slots move between four places: `free` (to be filled), the producer's hands (being filled),
// `ready` (filled, in batch order) and `held` (lent to the caller until its next call).
// `generation` counts start_epoch calls: work begun for an older epoch is discarded.
struct Loader::Impl {
  const Dataset& dataset;
  const LoaderOptions options;
  const int64_t local_batch, batches, sample_numel;
  const int64_t label_numel;  // labels per sample: 1, or T for a sequence
  std::vector<Slot> slots;

  std::mutex mu;
  std::condition_variable work_cv;   // producer: a free slot and a batch to make, or stop
  std::condition_variable ready_cv;  // consumer: a ready batch or an error
  std::shared_ptr<const std::vector<int64_t>> order;  // null until the first start_epoch
  int64_t epoch = 0;
  std::atomic<uint64_t> generation{0};
  int64_t produced = 0;  // next batch to fill
  int64_t consumed = 0;  // batches handed out this epoch
  std::deque<int> free, ready;
  int held = -1;
  std::exception_ptr error;
  bool stop = false;
  std::thread thread;  // last member: started once the rest exists

  Impl(const Dataset& d, const LoaderOptions& o)
      : dataset(d),
        options(o),
        local_batch(o.global_batch / o.world),
        batches(count_batches(d.size(), o.global_batch, o.drop_last)),
        sample_numel(d.sample_shape().numel()),
        label_numel(d.label_shape().numel()) {
    const Shape sample = dataset.sample_shape();  // a value: dims() must not outlive it
    std::vector<int64_t> dims{local_batch};
    dims.insert(dims.end(), sample.dims().begin(), sample.dims().end());
    const Shape label = dataset.label_shape();
    std::vector<int64_t> label_dims{local_batch};
    label_dims.insert(label_dims.end(), label.dims().begin(), label.dims().end());
    slots.resize(static_cast<size_t>(options.prefetch) + 1);
    for (size_t s = 0; s < slots.size(); ++s) {
      Allocator& memory = options.allocator ? *options.allocator : cpu_allocator();
      slots[s].images = Tensor::empty(Shape(dims), DType::f32, memory);
      slots[s].labels = Tensor::empty(Shape(label_dims), DType::i32, memory);
      if (uploads()) {
        slots[s].device_images = options.device->empty(Shape(dims), DType::f32);
        slots[s].device_labels = options.device->empty(Shape(label_dims), DType::i32);
      }
      free.push_back(static_cast<int>(s));
    }
    // The thread records its batches in the trace of the thread that made the loader.
    if (options.prefetch > 0)
      thread = std::thread([this, track = trace::new_track(options.trace_name)] {
        trace::ThreadScope traced(track);
        produce();
      });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      generation.fetch_add(1);  // a batch being filled stops after its current sample
    }
    work_cv.notify_all();
    if (thread.joinable()) thread.join();
  }

  bool cancelled(uint64_t gen) const { return generation.load(std::memory_order_relaxed) != gen; }
  bool uploads() const { return options.device && options.device->device() != Device::cpu; }

  // Loads this rank's rows of global batch `g` into `slot`. Stops early, leaving the slot
  // incomplete, once `gen` is outdated: the caller then discards it.
  void fill(Slot& slot, int64_t g, const std::vector<int64_t>& ord, int64_t ep, uint64_t gen) {
    const int64_t first = g * options.global_batch;
    const int64_t m = std::min(options.global_batch, dataset.size() - first);
    const RowRange rows = rank_rows(m, options.rank, options.world);
    slot.index = g;
    slot.rows = rows.size();
    float* images = slot.images.data<float>();
    int32_t* labels = slot.labels.data<int32_t>();
    const int64_t* indices = ord.data() + first + rows.begin;
    auto load_rows = [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi && !cancelled(gen); ++i) {
        dataset.load_sample(indices[i], images + i * sample_numel, labels + i * label_numel, ep);
      }
    };
    const int64_t workers = std::min<int64_t>(options.workers, slot.rows);
    if (workers <= 1) {
      load_rows(0, slot.rows);
    } else {
      std::vector<std::exception_ptr> errors(workers);
      std::vector<std::thread> helpers;
      auto chunk = [&](int64_t w) {
        try {
          load_rows(slot.rows * w / workers, slot.rows * (w + 1) / workers);
        } catch (...) {
          errors[w] = std::current_exception();
        }
      };
      for (int64_t w = 1; w < workers; ++w) helpers.emplace_back(chunk, w);
      chunk(0);
      for (std::thread& t : helpers) t.join();
      for (const std::exception_ptr& e : errors) {
        if (e) std::rethrow_exception(e);
      }
    }
    if (uploads() && slot.rows > 0 && !cancelled(gen)) {
      options.device->upload(slot.device_images.narrow_batch(slot.rows),
                             slot.images.narrow_batch(slot.rows));
      options.device->upload(slot.device_labels.narrow_batch(slot.rows),
                             slot.labels.narrow_batch(slot.rows));
    }
  }

  // The background thread: fills free slots with the next batches of the current epoch.
  void produce() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      work_cv.wait(
          lock, [&] { return stop || (order && !error && produced < batches && !free.empty()); });
      if (stop) return;
      const int s = free.front();
      free.pop_front();
      const int64_t g = produced++;
      const std::shared_ptr<const std::vector<int64_t>> ord = order;
      const int64_t ep = epoch;
      const uint64_t gen = generation.load();
      lock.unlock();
      std::exception_ptr failure;
      try {
        TraceScope span(Region::load);
        fill(slots[s], g, *ord, ep, gen);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      if (stop) return;
      if (generation.load() != gen) {  // start_epoch ran meanwhile: this batch is stale
        free.push_back(s);
        continue;
      }
      if (failure) {
        error = failure;
        free.push_back(s);
      } else {
        ready.push_back(s);
      }
      ready_cv.notify_one();
    }
  }

  void view(const Slot& slot, Batch& out) const {
    out.images = (uploads() ? slot.device_images : slot.images).narrow_batch(slot.rows);
    out.labels = (uploads() ? slot.device_labels : slot.labels).narrow_batch(slot.rows);
    out.index = slot.index;
  }
};

Loader::Loader(const Dataset& dataset, const LoaderOptions& options) {
  DTRAIN_INPUT_CHECK(options.world >= 1 && options.rank >= 0 && options.rank < options.world)
      << "loader: rank " << options.rank << " outside [0, " << options.world << ")";
  DTRAIN_INPUT_CHECK(options.global_batch >= 1)
      << "dataset.batch_size: " << options.global_batch << " is not ≥ 1";
  DTRAIN_INPUT_CHECK(options.global_batch % options.world == 0)
      << "dataset.batch_size: " << options.global_batch << " is not divisible by the "
      << options.world << " data-parallel ranks";
  DTRAIN_INPUT_CHECK(dataset.size() >= 1) << dataset.describe() << ": no samples";
  DTRAIN_INPUT_CHECK(!options.drop_last || dataset.size() >= options.global_batch)
      << "dataset.batch_size: " << options.global_batch << " exceeds the " << dataset.size()
      << " samples of " << dataset.describe() << ": an epoch would have no full batch";
  DTRAIN_INPUT_CHECK(options.prefetch >= 0) << "loader: prefetch " << options.prefetch << " < 0";
  DTRAIN_INPUT_CHECK(options.workers >= 1) << "loader: workers " << options.workers << " < 1";
  impl_ = std::make_unique<Impl>(dataset, options);
}

Loader::~Loader() = default;

int64_t Loader::batches_per_epoch() const {
  return impl_->batches;
}

int64_t Loader::local_batch() const {
  return impl_->local_batch;
}

void Loader::start_epoch(int64_t epoch, int64_t first) {
  Impl& m = *impl_;
  // The permutation is built before taking the lock: the producer keeps working meanwhile.
  auto order = std::make_shared<const std::vector<int64_t>>(
      epoch_order(m.dataset.size(), m.options.seed, epoch, m.options.shuffle));
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.generation.fetch_add(1);
    m.order = std::move(order);
    m.epoch = epoch;
    m.produced = std::clamp<int64_t>(first, 0, m.batches);
    m.consumed = m.produced;
    m.error = nullptr;
    if (m.held >= 0) m.free.push_back(m.held);
    m.held = -1;
    for (int s : m.ready) m.free.push_back(s);
    m.ready.clear();
  }
  m.work_cv.notify_one();
}

bool Loader::next(Batch& out) {
  Impl& m = *impl_;
  DTRAIN_CHECK(m.order != nullptr) << "Loader::next() before start_epoch()";
  if (m.options.prefetch == 0) {  // no thread: the one slot is filled here
    if (m.consumed >= m.batches) return false;
    m.fill(m.slots[0], m.consumed, *m.order, m.epoch, m.generation.load());
    ++m.consumed;
    m.view(m.slots[0], out);
    return true;
  }
  std::unique_lock<std::mutex> lock(m.mu);
  if (m.held >= 0) {
    m.free.push_back(m.held);
    m.held = -1;
    m.work_cv.notify_one();
  }
  if (m.consumed >= m.batches) return false;
  m.ready_cv.wait(lock, [&] { return !m.ready.empty() || m.error; });
  if (m.ready.empty()) std::rethrow_exception(m.error);
  m.held = m.ready.front();
  m.ready.pop_front();
  ++m.consumed;
  m.view(m.slots[m.held], out);
  return true;
}

}  // namespace dtrain
