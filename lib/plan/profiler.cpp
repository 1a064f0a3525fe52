#include "plan/profiler.h"

#include <algorithm>  // nth_element
#include <atomic>
#include <chrono>
#include <cstring>  // memcpy
#include <thread>

#include "comm/comm_thread.h"  // CommThread: S
#include "compress/codec.h"    // make_codec
#include "core/error.h"
#include "core/rng.h"    // random_normal, random_bits: profile inputs
#include "core/timer.h"  // Clock, seconds_since

namespace dtrain {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Median seconds of `reps` calls of f (after one untimed call that warms caches and pages).
template <typename F>
double time_median(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    f();
    t.push_back(seconds_since(start));
  }
  return median(std::move(t));
}

// Repetitions that keep one measurement near `budget_s` for an operation on `bytes`, assuming
// a few GB/s; at least 3 so that the median means something.
int reps_for(double bytes, double budget_s = 0.01) {
  const double guess = bytes / 4e9 + 1e-6;
  return std::clamp(static_cast<int>(budget_s / guess), 3, 200);
}

// A gradient-like block: small signed values of varied magnitude.
Tensor random_block(int64_t elements, uint64_t stream) {
  Tensor t = Tensor::empty(Shape{std::max<int64_t>(elements, 1)});
  float* x = t.data<float>();
  for (int64_t i = 0; i < elements; ++i) x[i] = 1e-3f * random_normal(17, stream, i);
  return t;
}

// One-way latency of handing a cache line from one core to another: the floor of any
// shared-memory message. Two threads bounce a counter; half the median round trip.
double measure_handoff() {
  std::atomic<int64_t> ball{0};
  std::atomic<bool> stop{false};
  constexpr int kRounds = 2000;
  std::thread partner([&] {
    int64_t seen = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t v = ball.load(std::memory_order_acquire);
      if (v != seen && v % 2 == 1) {
        ball.store(v + 1, std::memory_order_release);
        seen = v + 1;
      }
    }
  });
  std::vector<double> trips;
  const auto deadline = Clock::now() + std::chrono::milliseconds(50);
  for (int i = 0; i < kRounds && Clock::now() < deadline; ++i) {
    const int64_t v = ball.load() + 1;
    const auto start = Clock::now();
    ball.store(v, std::memory_order_release);
    // The partner may be descheduled on a busy machine: give up on this round after 1 ms.
    while (ball.load(std::memory_order_acquire) != v + 1 && seconds_since(start) < 1e-3) {
    }
    if (ball.load() != v + 1) break;
    trips.push_back(seconds_since(start));
  }
  stop = true;
  partner.join();
  return trips.empty() ? 1e-6 : median(std::move(trips)) / 2;
}

}  // namespace

ComputeTimes profile_compute(Model& model, Sgd& optimizer, const ModelInput& input, int world,
                             int warmup, int iterations, double budget_s) {
  DTRAIN_CHECK(input.batch > 0 && iterations > 0) << "nothing to profile";
  std::vector<int64_t> dims{input.batch};
  for (int64_t d : input.sample_shape.dims()) dims.push_back(d);
  Tensor images = Tensor::empty(Shape(dims));
  Tensor labels = Tensor::empty(Shape{input.batch}, DType::i32);
  for (int64_t i = 0; i < images.numel(); ++i) images.data<float>()[i] = random_normal(3, 1, i);
  for (int64_t i = 0; i < input.batch; ++i)
    labels.data<int32_t>()[i] = static_cast<int32_t>(random_bits(3, 2, i) % input.classes);

  Backend& backend = model.backend();
  model.set_training(true);
  std::vector<double> fwd, bwd, upd;
  auto phase = [&backend](std::vector<double>& sink, auto&& f) {
    const auto start = Clock::now();
    f();
    backend.synchronize();
    sink.push_back(seconds_since(start));
  };
  // As the schedulers do: the loss scaled to the global-batch mean.
  const float scale = 1.0f / static_cast<float>(input.batch * world);
  const auto start = Clock::now();
  for (int i = 0; i < warmup + iterations; ++i) {
    if (seconds_since(start) > budget_s) {
      if (i >= 1 && i < warmup) warmup = i;  // one warm-up step must do
      if (i >= warmup + 3) break;
    }
    phase(fwd, [&] {
      model.forward(images, labels);
      model.last_stats();  // the scheduler reads the loss every iteration
    });
    phase(bwd, [&] { model.backward(scale); });
    phase(upd, [&] { optimizer.step(1e-4f); });
  }
  auto timed = [warmup](std::vector<double>& v) {
    return median(std::vector<double>(v.begin() + warmup, v.end()));
  };
  return {timed(fwd), timed(bwd), timed(upd), static_cast<int>(fwd.size()) - warmup};
}

TransportTimes profile_transport(int64_t block_elements) {
  TransportTimes t;
  block_elements = std::max<int64_t>(block_elements, 1024);
  const double bytes = 4.0 * static_cast<double>(block_elements);
  Tensor a = random_block(block_elements, 1), b = random_block(block_elements, 2);
  t.copy_s_per_byte =
      time_median(reps_for(bytes),
                  [&] { std::memcpy(b.raw(), a.raw(), static_cast<size_t>(bytes)); }) /
      bytes;
  auto none = make_codec("none");
  t.gamma_s_per_byte =
      time_median(reps_for(bytes),
                  [&] { none->decode_add(a.raw(), block_elements, b.data<float>()); }) /
      bytes;
  t.handoff_s = measure_handoff();
  // PacedComm sleeps for each message; the scheduler's timer slack adds to every sleep.
  t.sleep_overshoot_s =
      time_median(8, [] { std::this_thread::sleep_for(std::chrono::microseconds(500)); }) - 500e-6;
  t.sleep_overshoot_s = std::max(t.sleep_overshoot_s, 0.0);
  CommThread thread;
  t.sync_s = time_median(50, [&thread] { thread.submit([] {}).get(); });
  return t;
}

CodecCost profile_codec(const std::string& name, int64_t block_elements) {
  auto codec = make_codec(name);
  block_elements = std::max<int64_t>(block_elements, 1024);
  const double n = static_cast<double>(block_elements);
  Tensor grad = random_block(block_elements, 3), sum = random_block(block_elements, 4);
  std::vector<char> wire(codec->encoded_bytes(block_elements));
  const int reps = reps_for(4 * n);
  CodecCost c;
  c.name = name;
  c.header_bytes = static_cast<double>(codec->encoded_bytes(0));
  c.bytes_per_element = static_cast<double>(codec->encoded_bytes(1) - codec->encoded_bytes(0));
  c.encode_s =
      time_median(reps, [&] { codec->encode(grad.data<float>(), block_elements, wire.data()); }) /
      n;
  c.decode_s =
      time_median(reps, [&] { codec->decode(wire.data(), block_elements, sum.data<float>()); }) / n;
  c.decode_add_s =
      time_median(reps,
                  [&] { codec->decode_add(wire.data(), block_elements, sum.data<float>()); }) /
      n;
  return c;
}

}  // namespace dtrain
