// The loader's GPU path without a GPU: a stand-in backend whose "device" memory is host memory
// tagged as CUDA. Batches must come out on the device, equal to the host path's, uploaded by
// the loader's own thread when it prefetches.
#include <doctest/doctest.h>

#include <cstring>  // memcpy
#include <thread>

#include "../support/stub_backend.h"  // StubBackend
#include "backend/backend.h"
#include "data/loader.h"
#include "data/token_windows.h"  // TokenArrayWindows: batches with labels [rows, T]
#include "fixtures.h"            // IndexDataset

using namespace dtrain;
using namespace dtrain::testing;

namespace {

class TaggedAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override { return cpu_allocator().allocate(bytes); }
  void deallocate(void* p) override { cpu_allocator().deallocate(p); }
  Device device() const override { return Device::cuda; }
};

// The loader uploads and may wait; every other op stays unused.
class FakeDevice final : public test::StubBackend {
 public:
  std::string name() const override { return "fake device"; }
  Device device() const override { return Device::cuda; }
  Allocator& allocator() override { return memory_; }
  void upload(const Tensor& dst, const Tensor& src) override {
    REQUIRE(dst.device() == Device::cuda);
    REQUIRE(src.device() == Device::cpu);
    REQUIRE(dst.bytes() == src.bytes());
    std::memcpy(dst.raw(), src.raw(), src.bytes());
    ++uploads;
    if (std::this_thread::get_id() != main_thread) ++uploads_off_main;
  }
  int uploads = 0, uploads_off_main = 0;

 private:
  TaggedAllocator memory_;
  std::thread::id main_thread = std::this_thread::get_id();
};

// Every batch of one epoch as (images, labels) values, read as host memory.
std::vector<std::pair<std::vector<float>, std::vector<int32_t>>> epoch(Loader& loader,
                                                                       Device expected) {
  std::vector<std::pair<std::vector<float>, std::vector<int32_t>>> out;
  loader.start_epoch(1);
  Batch b;
  while (loader.next(b)) {
    CHECK(b.images.device() == expected);
    CHECK(b.labels.device() == expected);
    const float* x = b.images.data<float>();
    const int32_t* y = b.labels.data<int32_t>();
    out.emplace_back(std::vector<float>(x, x + b.images.numel()),
                     std::vector<int32_t>(y, y + b.labels.numel()));
  }
  return out;
}

}  // namespace

TEST_CASE("loader: batches uploaded to a device equal the host batches, off the main thread") {
  IndexDataset data(250, Shape{2, 3, 5});
  LoaderOptions o;
  o.global_batch = 20;
  o.drop_last = false;  // a short last batch is uploaded with its own row count
  Loader host(data, o);
  const auto reference = epoch(host, Device::cpu);
  for (int prefetch : {0, 2}) {
    CAPTURE(prefetch);
    FakeDevice device;
    o.prefetch = prefetch;
    o.device = &device;
    {
      Loader loader(data, o);
      CHECK(epoch(loader, Device::cuda) == reference);
    }
    CHECK(device.uploads == 2 * static_cast<int>(reference.size()));
    CHECK(device.uploads_off_main == (prefetch > 0 ? device.uploads : 0));
  }
}

TEST_CASE("loader: sequence batches' [rows, T] labels are uploaded with them") {
  auto tokens = std::make_shared<std::vector<int32_t>>(61);
  for (size_t i = 0; i < tokens->size(); ++i) (*tokens)[i] = static_cast<int32_t>(i * 3 % 50);
  TokenArrayWindows<int32_t> data(tokens->data(), 15, 4, 50, "sequence", tokens);
  LoaderOptions o;
  o.global_batch = 4;
  o.drop_last = false;
  Loader host(data, o);
  const auto reference = epoch(host, Device::cpu);
  REQUIRE(reference.size() == 4);
  CHECK(reference[3].second.size() == 3 * 4);  // the short last batch: 3 rows of 4 labels
  for (int prefetch : {0, 2}) {
    CAPTURE(prefetch);
    FakeDevice device;
    o.prefetch = prefetch;
    o.device = &device;
    {
      Loader loader(data, o);
      loader.start_epoch(1);
      Batch b;
      REQUIRE(loader.next(b));
      CHECK(b.labels.shape() == Shape{4, 4});
      CHECK(b.images.shape() == Shape{4, 4});
      CHECK(epoch(loader, Device::cuda) == reference);
    }
  }
}
