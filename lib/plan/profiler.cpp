#include "plan/profiler.h"

#include <pthread.h>  // pthread_setaffinity_np: the yield wait's threads
#include <sched.h>    // sched_getaffinity, sched_setaffinity, sched_yield

#include <algorithm>  // nth_element, sort
#include <atomic>
#include <chrono>
#include <cmath>    // pow
#include <cstring>  // memcpy
#include <numeric>  // accumulate
#include <optional>
#include <thread>

#include "comm/comm_thread.h"  // CommThread: S
#include "compress/codec.h"    // make_codec
#include "core/error.h"
#include "core/rng.h"          // random_normal: profile inputs
#include "core/timer.h"        // Clock, seconds_since
#include "plan/layer_timer.h"  // LayerTimer: time_layers

namespace dtrain {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Median seconds of `reps` calls of f(i) (after one untimed call that warms caches and pages).
template <typename F>
double time_median(int reps, F&& f) {
  f(0);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    f(i + 1);
    t.push_back(seconds_since(start));
  }
  return median(std::move(t));
}

// Repetitions that keep one measurement near `budget_s` for an operation on `bytes`, assuming
// a few GB/s; at least 5 so that the median means something.
int reps_for(double bytes, double budget_s = 0.01) {
  const double guess = bytes / 4e9 + 1e-6;
  return std::clamp(static_cast<int>(budget_s / guess), 5, 200);
}

// Gradient-like blocks: small signed values of varied magnitude. Enough of them to exceed the
// caches of one core (blocks in training come from the backward pass or from another rank).
struct Blocks {
  std::vector<Tensor> blocks;
  Blocks(int64_t elements, uint64_t stream) {
    const double bytes = 4.0 * static_cast<double>(elements);
    const int count = std::clamp(static_cast<int>(16e6 / bytes), 1, 16);
    for (int b = 0; b < count; ++b) {
      Tensor t = Tensor::empty(Shape{elements});
      float* x = t.data<float>();
      for (int64_t i = 0; i < elements; ++i)
        x[i] = 1e-3f * random_normal(17, stream + static_cast<uint64_t>(b) * 1000, i);
      blocks.push_back(std::move(t));
    }
  }
  float* operator[](int i) const { return blocks[i % blocks.size()].data<float>(); }
};

// Pins the calling thread to one CPU; false where that is not allowed (the measurement runs
// unpinned). Each measuring thread pins itself: pinning a std::thread from outside races with
// its end, and glibc then applies the mask to the caller (an exited thread's id reads 0), which
// left the whole profile on one core now and then.
bool pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// The first `count` CPUs this process may run on (fewer where it may run on fewer).
std::vector<int> allowed_cpus(size_t count) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < count; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  return cpus;
}

// One-way latency of handing a cache line from one core to another: the floor of any
// shared-memory message. Two threads bounce a counter; half the median round trip.
double measure_handoff() {
  std::atomic<int64_t> ball{0};
  std::atomic<bool> stop{false};
  constexpr int kRounds = 2000;
  // Two cores of their own where there are two: left to the scheduler, both spinning threads
  // sometimes share one core, and every trip then waits for a time slice (a 2 ms "hand-off").
  const std::vector<int> cpus = allowed_cpus(2);
  auto own_core = [&cpus](size_t i) {
    if (cpus.size() == 2) pin_self(cpus[i]);
  };
  std::thread partner([&] {
    own_core(1);
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t v = ball.load(std::memory_order_acquire);
      if (v % 2 == 1) ball.store(v + 1, std::memory_order_release);
    }
  });
  std::vector<double> trips;
  std::thread pinger([&] {
    own_core(0);
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
  });
  pinger.join();
  stop = true;
  partner.join();
  return trips.empty() ? 1e-6 : median(std::move(trips)) / 2;
}

// How long a thread that waits by polling with sched_yield (Open MPI's blocking calls under
// mpi_yield_when_idle: the comm threads' MPI waits) takes to see its peer's message when a
// computing thread shares its core: it gives the core away at every yield and gets it back
// only when the computing thread's time slice ends. The mean round trip between that poller
// and one on a core of its own, which answers at once. Pinned: left to the scheduler, the two
// pollers share a core or not at random (1 us or 1 ms). Negative: a thread could not be pinned.
double yield_wait_once(const std::vector<int>& cpus) {
  std::atomic<bool> stop{false};
  std::atomic<int> pinned{0}, unpinned{0};  // the threads that pinned themselves, or failed to
  auto own_core = [&](int cpu) { ++(pin_self(cpu) ? pinned : unpinned); };
  std::thread busy([&] {
    own_core(cpus[0]);
    volatile double x = 1;
    while (!stop.load(std::memory_order_relaxed)) x = x * 0.999 + 1;
  });
  std::atomic<int> turn{-1};  // -1: not started; then 1: the partner's turn, 0: ours
  constexpr int kTrips = 20;
  std::thread partner([&] {
    own_core(cpus[0]);
    while (turn.load(std::memory_order_acquire) < 0) sched_yield();
    for (int i = 0; i < kTrips; ++i) {
      while (turn.load(std::memory_order_acquire) != 1) sched_yield();
      turn.store(0, std::memory_order_release);
    }
  });
  double trip = 0;
  std::thread poller([&] {
    own_core(cpus[1]);
    while (pinned.load() + unpinned.load() < 3) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the busy thread runs
    const auto start = Clock::now();
    turn.store(0, std::memory_order_release);
    for (int i = 0; i < kTrips; ++i) {
      turn.store(1, std::memory_order_release);
      while (turn.load(std::memory_order_acquire) != 0) sched_yield();
    }
    trip = seconds_since(start) / kTrips;
  });
  poller.join();
  partner.join();
  stop = true;
  busy.join();
  return unpinned.load() == 0 ? trip : -1;
}

// The median of a few rounds: one round of 20 trips measured anywhere from 1.2 to 2.7 ms on
// 2 cores, and the plan's all-reduces among time-sliced ranks are a multiple of it.
double measure_yield_wait() {
  const std::vector<int> cpus = allowed_cpus(2);
  if (cpus.size() < 2) return 0;  // one core: the pollers take turns with the computing thread
  constexpr int kRounds = 5;
  std::vector<double> rounds;
  for (int i = 0; i < kRounds; ++i) {
    const double trip = yield_wait_once(cpus);
    if (trip < 0) return 0;
    rounds.push_back(trip);
  }
  return median(std::move(rounds));
}

// Typical lateness of sleep_for(seconds): the median, since on a busy machine a few sleeps
// that return milliseconds late would otherwise make every paced message look that late.
double sleep_overshoot(double seconds, int reps) {
  std::vector<double> late;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    late.push_back(seconds_since(start) - seconds);
  }
  return std::max(median(std::move(late)), 0.0);
}

// Per-iteration totals of the timed iterations.
std::vector<double> timed_totals(const std::vector<double>& data, const std::vector<double>& fwd,
                                 const std::vector<double>& bwd, const std::vector<double>& upd,
                                 int warmup) {
  std::vector<double> totals;
  for (size_t i = static_cast<size_t>(warmup); i < fwd.size(); ++i)
    totals.push_back(data[i] + fwd[i] + bwd[i] + upd[i]);
  return totals;
}

}  // namespace

double expected_max_excess(std::vector<double> samples, int p) {
  if (samples.empty() || p <= 1) return 0;
  std::sort(samples.begin(), samples.end());
  // P(max of p draws = the i-th smallest) = (i/N)^p − ((i−1)/N)^p.
  const double n = static_cast<double>(samples.size());
  double expected = 0;
  for (size_t i = 0; i < samples.size(); ++i)
    expected += samples[i] * (std::pow((i + 1) / n, p) - std::pow(i / n, p));
  return std::max(expected - mean(samples), 0.0);
}

ComputeTimes profile_compute(Model& model, Optimizer& optimizer, Loader& loader, int world,
                             int warmup, int iterations, double budget_s, bool time_layers) {
  DTRAIN_CHECK(iterations > 0) << "nothing to profile";
  Backend& backend = model.backend();
  model.set_training(true);
  std::optional<LayerTimer> timer;
  if (time_layers) {
    std::vector<LayerRange> layers;
    for (const LayerRange& layer : model.layer_ranges())
      if (layer.offset >= model.trainable_offset() && layer.count > 0) layers.push_back(layer);
    timer.emplace(model, std::move(layers));
  }
  std::vector<double> data, fwd, bwd, upd;
  auto phase = [&backend](std::vector<double>* sink, auto&& f) {
    const auto start = Clock::now();
    f();
    backend.synchronize();
    if (sink) sink->push_back(seconds_since(start));
  };
  int64_t epoch = 0;
  loader.start_epoch(epoch);
  Batch batch;
  const auto start = Clock::now();
  int phased = 0;  // iterations in the phase means (the warm-up's included)
  for (int i = 0; i < warmup + iterations; ++i) {
    // Every other timed step, the layer timer's: its marks stay out of the phase means.
    const bool by_layer = timer && i >= warmup && (i - warmup) % 2 == 1;
    if (seconds_since(start) > budget_s) {
      if (i >= 1 && i < warmup) warmup = i;  // one warm-up step must do
      if (phased >= warmup + 3 && (!timer || timer->iterations() >= 1)) break;
    }
    phase(by_layer ? nullptr : &data, [&] {
      if (!loader.next(batch)) {
        loader.start_epoch(++epoch);
        DTRAIN_CHECK(loader.next(batch)) << "the loader has no batch to profile with";
      }
    });
    const int64_t rows = batch.rows();
    // As the schedulers do: the loss scaled to the global-batch mean.
    const float scale = 1.0f / static_cast<float>(rows * world);
    if (by_layer) {
      timer->begin();
      model.forward(batch.images, batch.labels);
      model.last_stats();
      model.backward(scale, [&](int64_t offset) { timer->on_ready(offset); });
      timer->end();
      optimizer.step(1e-4f);
      backend.synchronize();
      continue;
    }
    phase(&fwd, [&] {
      model.forward(batch.images, batch.labels);
      model.last_stats();  // the scheduler reads the loss every iteration
    });
    phase(&bwd, [&] { model.backward(scale); });
    phase(&upd, [&] { optimizer.step(1e-4f); });
    ++phased;
  }
  auto step = [&] {
    if (!loader.next(batch)) loader.start_epoch(++epoch), loader.next(batch);
    model.forward(batch.images, batch.labels);
    model.last_stats();
    model.backward(1.0f / static_cast<float>(batch.rows() * world));
    optimizer.step(1e-4f);
    backend.synchronize();
  };
  ComputeTimes t;
  const double hot = mean(timed_totals(data, fwd, bwd, upd, warmup));
  for (const double idle : {5e-3, 20e-3}) {
    std::vector<double> after;
    for (int i = 0; i < (idle < 10e-3 ? 8 : 5) && seconds_since(start) < budget_s; ++i) {
      std::this_thread::sleep_for(std::chrono::duration<double>(idle));
      const auto begin = Clock::now();
      step();
      after.push_back(seconds_since(begin));
    }
    t.idle_s.push_back(idle);
    t.idle_penalty_s.push_back(after.empty() ? 0 : std::max(mean(after) - hot, 0.0));
  }
  auto timed = [warmup](const std::vector<double>& v) {
    return std::vector<double>(v.begin() + warmup, v.end());
  };
  // Medians: a few steps that another process delayed (a busy machine) would otherwise move the
  // whole plan; the spread of the steps is what skew_s below takes.
  t.data_s = median(timed(data));
  t.forward_s = median(timed(fwd));
  t.backward_s = median(timed(bwd));
  t.update_s = median(timed(upd));
  const std::vector<double> totals = timed_totals(data, fwd, bwd, upd, warmup);
  t.skew_s = expected_max_excess(totals, world);
  t.iterations = static_cast<int>(totals.size());
  if (timer) t.layers = timer->means();
  return t;
}

UpdatePasses profile_update_passes(Model& model, Optimizer& optimizer, Loader& loader, int world,
                                   int reps) {
  WeightPrediction* prediction = optimizer.prediction();
  if (!prediction) return {};  // SAPipe runs no such pass with this optimizer
  Backend& backend = model.backend();
  const int64_t offset = model.trainable_offset(), count = model.num_parameters() - offset;
  const Tensor &params = model.parameters(), &grads = model.gradients();
  // SAPipe's other buffers of the model's size: the master weights or x̃, the own gradient, Δ.
  const Tensor out = backend.zeros({model.num_parameters()}),
               own = backend.zeros({model.num_parameters()}),
               delta = backend.zeros({model.num_parameters()});
  constexpr float kLr = 1e-4f;  // only the cost matters
  const float share = 1.0f / static_cast<float>(world);
  std::vector<double> dot, sum, step_predict, step_delta, predict;
  model.set_training(true);
  Batch batch;
  for (int i = 0; i <= reps; ++i) {
    if (!loader.next(batch)) {
      loader.start_epoch(0);
      DTRAIN_CHECK(loader.next(batch)) << "the loader has no batch to profile with";
    }
    model.forward(batch.images, batch.labels);
    model.backward(1.0f / static_cast<float>(batch.rows() * world));
    backend.synchronize();
    auto timed = [&](std::vector<double>& sink, auto&& f) {
      const auto start = Clock::now();
      f();
      backend.synchronize();
      if (i > 0) sink.push_back(seconds_since(start));
    };
    // wp3's two passes first, in the order and state training runs them.
    optimizer.begin_step();
    timed(dot, [&] {
      prediction->step_range_dot(kLr, params, grads, -share, own, delta, offset, count);
    });
    timed(sum, [&] {
      prediction->predict_range_sum(kLr, out, params, GradientSum{share, own, 1.0f, grads}, offset,
                                    count);
    });
    optimizer.begin_step();
    timed(step_predict,
          [&] { prediction->step_predict_range(kLr, params, grads, grads, out, offset, count); });
    optimizer.begin_step();
    timed(step_delta,
          [&] { prediction->step_range_delta(kLr, params, grads, delta, offset, count); });
    timed(predict, [&] { prediction->predict_range(kLr, out, params, grads, offset, count); });
  }
  return {median(dot), median(sum), median(step_predict), median(step_delta), median(predict)};
}

TransportTimes profile_transport(int64_t block_elements) {
  TransportTimes t;
  block_elements = std::max<int64_t>(block_elements, 1024);
  const double bytes = 4.0 * static_cast<double>(block_elements);
  const Blocks src(block_elements, 1), dst(block_elements, 2);
  t.copy_s_per_byte =
      time_median(reps_for(bytes),
                  [&](int i) { std::memcpy(dst[i], src[i], static_cast<size_t>(bytes)); }) /
      bytes;
  auto none = make_codec("none");
  t.gamma_s_per_byte =
      time_median(reps_for(bytes),
                  [&](int i) { none->decode_add(src[i], block_elements, dst[i]); }) /
      bytes;
  t.handoff_s = measure_handoff();
  // PacedComm sleeps for every message; the sleeps return late, and later for longer ones.
  constexpr double kShort = 0.5e-3, kLong = 10e-3;
  const double late_short = sleep_overshoot(kShort, 11), late_long = sleep_overshoot(kLong, 5);
  t.overshoot_per_s = std::max((late_long - late_short) / (kLong - kShort), 0.0);
  t.overshoot_s = std::max(late_short - t.overshoot_per_s * kShort, 0.0);
  // S: in training the comm thread has been idle (asleep) when a request comes. The median:
  // a typical hand-off, not the few that a busy machine delays by a time slice.
  CommThread thread;
  std::vector<double> trips;
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    const auto start = Clock::now();
    thread.submit([] {}).get();
    trips.push_back(seconds_since(start));
  }
  t.sync_s = median(std::move(trips));
  t.yield_wait_s = measure_yield_wait();
  return t;
}

CodecCost profile_codec(const std::string& name, int64_t elements, int ranks) {
  auto codec = make_codec(name);
  const int p = std::max(ranks, 2);  // one rank runs no ring: time that of two
  const int64_t n = std::max<int64_t>(elements, 1024 * p);
  Tensor grad = Tensor::empty(Shape{n});
  for (int64_t i = 0; i < n; ++i) grad.data<float>()[i] = 1e-3f * random_normal(17, 3, i);
  float* data = grad.data<float>();
  const size_t wire = codec->encoded_bytes((n + p - 1) / p);
  std::vector<char> send(wire, 0), recv(wire, 0);
  auto begin = [&](int c) { return n * c / p; };
  auto length = [&](int c) { return begin(c + 1) - begin(c); };
  auto mod = [p](int c) { return ((c % p) + p) % p; };
  // Seconds (one entry per repetition) and elements of one repetition, per operation.
  struct Op {
    std::vector<double> seconds;
    double elements = 0;
  } encode, decode, decode_add;
  auto timed = [](Op& op, int64_t count, auto&& f) {
    const auto start = Clock::now();
    f();
    op.seconds.back() += seconds_since(start);
    op.elements += static_cast<double>(count);
  };
  // Rank 0's calls in ring_allreduce.cpp; the peer's blocks are stood in for by our own.
  auto ring = [&] {
    for (Op* op : {&encode, &decode, &decode_add}) op->seconds.push_back(0), op->elements = 0;
    for (int s = 0; s < p - 1; ++s) {
      const int out = mod(-s), in = mod(-s - 1);
      timed(encode, length(out),
            [&] { codec->encode(data + begin(out), length(out), send.data()); });
      std::memcpy(recv.data(), send.data(), codec->encoded_bytes(length(out)));
      timed(decode_add, length(in),
            [&] { codec->decode_add(recv.data(), length(in), data + begin(in)); });
    }
    const int own = mod(1);
    timed(encode, length(own), [&] { codec->encode(data + begin(own), length(own), send.data()); });
    timed(decode, length(own), [&] { codec->decode(send.data(), length(own), data + begin(own)); });
    for (int s = 0; s < p - 1; ++s) {
      const int in = mod(-s);
      std::memcpy(recv.data(), send.data(), codec->encoded_bytes(length(in)));
      timed(decode, length(in), [&] { codec->decode(recv.data(), length(in), data + begin(in)); });
    }
  };
  ring();  // warm-up
  const int reps = reps_for(8.0 * static_cast<double>(n), 0.02);
  encode.seconds.clear(), decode.seconds.clear(), decode_add.seconds.clear();
  for (int i = 0; i < std::min(reps, 20); ++i) ring();
  CodecCost c;
  c.name = name;
  // Per element over a large count: quantize8's 4 bytes of scale per 1024 values are 4/1024 of a
  // byte each (exact wherever a block holds a whole number of scale blocks).
  constexpr int64_t kLarge = int64_t{1} << 20;
  c.header_bytes = static_cast<double>(codec->encoded_bytes(0));
  c.bytes_per_element =
      static_cast<double>(codec->encoded_bytes(kLarge) - codec->encoded_bytes(0)) / kLarge;
  c.encode_s = median(encode.seconds) / encode.elements;
  c.decode_s = median(decode.seconds) / decode.elements;
  c.decode_add_s = median(decode_add.seconds) / decode_add.elements;
  return c;
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
  }
  return std::max(CPU_COUNT(&set), 1);
}

}  // namespace dtrain
