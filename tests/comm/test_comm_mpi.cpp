// Comm, CommThread and the ring all-reduce on however many ranks mpirun started.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include <cmath>
#include <cstring>  // memcmp
#include <string>
#include <vector>

#include "comm/comm_thread.h"
#include "comm/mpi_comm.h"
#include "comm/paced_comm.h"
#include "comm/ring_allreduce.h"
#include "compress/codec.h"
#include "core/cpu_policy.h"
#include "core/timer.h"

using namespace dtrain;

namespace {
// Small integers: float sums of them are exact in any order.
float value(int rank, int64_t i) {
  return static_cast<float>((rank * 31 + i * 7) % 17 - 8);
}
}  // namespace

TEST_CASE("ring all-reduce without compression equals the exact sum, odd sizes") {
  auto comm = make_mpi_comm();
  const int p = comm->size(), r = comm->rank();
  auto codec = make_codec("none");
  RingAllreduce ring(*comm, *codec, 100003);
  for (int64_t n : {1, 2, 3, 5, 7, 64, 1000, 100003}) {
    CAPTURE(n);
    std::vector<float> data(n);
    for (int64_t i = 0; i < n; ++i) data[i] = value(r, i);
    ring.run(data.data(), n);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      float expect = 0;
      for (int q = 0; q < p; ++q) expect += value(q, i);
      wrong += data[i] != expect;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("ring all-reduce with codecs stays within the bound its steps imply") {
  auto comm = make_mpi_comm();
  const int p = comm->size(), r = comm->rank();
  for (const char* name : {"truncate16", "quantize8"}) {
    CAPTURE(name);
    auto codec = make_codec(name);
    const int64_t n = 10007;
    RingAllreduce ring(*comm, *codec, n);
    std::vector<float> data(n), exact(n, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      data[i] = std::sin(0.001f * i * (r + 1)) * (1 + r);
      for (int q = 0; q < p; ++q) exact[i] += std::sin(0.001f * i * (q + 1)) * (1 + q);
    }
    ring.run(data.data(), n);
    // Each of the p−1 reduce-scatter steps and the final broadcast encode once; a partial sum
    // is bounded by the sum of magnitudes (here Σ(1+q)).
    double magnitude = 0;
    for (int q = 0; q < p; ++q) magnitude += 1 + q;
    const double bound = p * codec->error_bound(magnitude, magnitude) + 1e-5;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) worst = std::max(worst, double(std::abs(data[i] - exact[i])));
    CHECK(worst <= bound);
    // Every rank holds the very same result.
    double checksum = 0;
    for (float v : data) checksum += v;
    std::vector<double> mine{checksum}, total{checksum * p};
    comm->allreduce_sum(mine);
    CHECK(mine[0] == doctest::Approx(total[0]).epsilon(1e-12));
  }
}

TEST_CASE(
    "the ring's halves: reduce-scatter leaves block r as the all-reduce does, all-gather the "
    "rest") {
  auto comm = make_mpi_comm();
  const int p = comm->size(), r = comm->rank();
  for (const std::string name : {"none", "truncate16", "quantize8"}) {
    auto codec = make_codec(name);
    for (int64_t n : {1, 3, 7, 1000, 100003}) {
      CAPTURE(name);
      CAPTURE(n);
      // Not small integers: the order of the sums shows in the bits.
      std::vector<float> mine(n);
      for (int64_t i = 0; i < n; ++i) mine[i] = std::sin(0.37f * i + r) * (1 + r);
      std::vector<float> reduced = mine, halves = mine;
      RingAllreduce ring(*comm, *codec, n);
      ring.run(reduced.data(), n);
      ring.reduce_scatter(halves.data(), n);
      const RingBlock own = ring_block(n, r, p);
      CHECK(std::memcmp(halves.data() + own.begin, reduced.data() + own.begin,
                        own.count * sizeof(float)) == 0);
      if (name != "none") continue;  // a codec's all-gather rounds: only run() delivers that
      ring.all_gather(halves.data(), n);
      CHECK(std::memcmp(halves.data(), reduced.data(), n * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("ring blocks cover the buffer in rank order") {
  for (int p : {1, 2, 3, 4, 7}) {
    for (int64_t n : {0, 1, 5, 6, 100}) {
      int64_t next = 0;
      for (int c = 0; c < p; ++c) {
        const RingBlock b = ring_block(n, c, p);
        CHECK(b.begin == next);
        CHECK(b.count >= n / p);
        CHECK(b.count <= n / p + 1);
        next = b.begin + b.count;
      }
      CHECK(next == n);
    }
  }
}

TEST_CASE("comm thread runs requests in order and reports their time") {
  CommThread thread;
  std::vector<int> order;
  std::vector<std::future<void>> done;
  for (int i = 0; i < 20; ++i) done.push_back(thread.submit([&order, i] { order.push_back(i); }));
  for (auto& f : done) f.get();
  for (int i = 0; i < 20; ++i) CHECK(order[i] == i);
  auto failing = thread.submit([] { throw std::runtime_error("boom"); });
  CHECK_THROWS_WITH(failing.get(), "boom");
  CHECK(thread.take_busy_seconds() >= 0);
}

TEST_CASE("a comm thread started by a compute thread runs under the normal policy") {
  // core/cpu_policy.h: the compute threads' batch policy must not reach the comm threads.
  std::thread([] {
    REQUIRE(run_as_compute_thread());
    CommThread thread;
    bool batch = true;
    thread.submit([&batch] { batch = runs_as_compute_thread(); }).get();
    CHECK(!batch);
  }).join();
}

TEST_CASE("comm thread records each request's span and phase in its creator's trace") {
  trace::Recorder recorder(16);
  recorder.set_recording(true);
  trace::ThreadScope compute(&recorder, "compute");
  CommThread thread("gossip server");
  const auto before = Clock::now().time_since_epoch().count();
  thread.submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }).get();
  thread
      .submit([] {
        PhaseTimes unused;
        PhaseTimer inner(unused, Phase::compress);
      })
      .get();
  const auto tracks = recorder.tracks();
  REQUIRE(tracks.size() == 2);
  CHECK(tracks[0]->size() == 0);  // the compute thread recorded nothing
  const trace::ThreadTrack& comm = *tracks[1];
  CHECK(comm.name() == "gossip server");
  // The nested compress span ends before the request that holds it.
  REQUIRE(comm.size() == 3);
  CHECK(comm[0].what == trace_code(Phase::comm));
  CHECK(comm[1].what == trace_code(Phase::compress));
  CHECK(comm[2].what == trace_code(Phase::comm));
  CHECK(comm[0].begin_ns >= before);
  CHECK(comm[0].end_ns - comm[0].begin_ns >= 5'000'000);
  CHECK(comm[1].begin_ns >= comm[2].begin_ns);
  CHECK(comm[1].end_ns <= comm[2].end_ns);
  // The busy time is the requests' spans' sum.
  const double busy = 1e-9 * static_cast<double>(comm[0].end_ns - comm[0].begin_ns +
                                                 comm[2].end_ns - comm[2].begin_ns);
  CHECK(thread.take_busy_seconds() == doctest::Approx(busy).epsilon(1e-6));
}

TEST_CASE("all-reduce on the comm thread while the main thread computes") {
  auto comm = make_mpi_comm();
  auto codec = make_codec("none");
  RingAllreduce ring(*comm, *codec, 4096);
  CommThread thread;
  std::vector<float> grads(4096, 1.0f);
  auto pending = thread.submit([&] { ring.run(grads.data(), 4096); });
  double busy_work = 0;
  for (int i = 0; i < 100000; ++i) busy_work += std::sqrt(double(i));
  pending.get();
  CHECK(busy_work > 0);
  CHECK(grads[4095] == float(comm->size()));
}

TEST_CASE("point to point, broadcast, gather and split") {
  auto comm = make_mpi_comm();
  const int p = comm->size(), r = comm->rank();
  std::string text = r == 0 ? "hello" : "";
  comm->broadcast(text, 0);
  CHECK(text == "hello");
  auto rows = comm->gather({double(r), double(r * r)}, 0);
  if (r == 0) {
    REQUIRE(rows.size() == size_t(p));
    CHECK(rows[p - 1][1] == double((p - 1) * (p - 1)));
  }
  if (p >= 2) {
    int got = -1, mine = r;
    comm->sendrecv(&mine, sizeof mine, (r + 1) % p, &got, sizeof got, (r + p - 1) % p, 7);
    CHECK(got == (r + p - 1) % p);
  }
  auto half = comm->split(r % 2, r);
  CHECK(half->size() == (p + 1 - r % 2) / 2);
  std::vector<double> one{1.0};
  half->allreduce_sum(one);
  CHECK(one[0] == double(half->size()));
}

TEST_CASE("an emulated link makes each message cost at least latency + bytes / bandwidth") {
  // A lower bound only: emulation adds waiting, the real transfer adds more.
  auto comm = make_paced_comm(make_mpi_comm(), LinkModel{1e6, 0.01});  // 1 MB/s, 10 ms
  const int p = comm->size(), r = comm->rank();
  if (p < 2) return;
  std::vector<char> out(50000, 'x'), in(50000);
  const auto start = Clock::now();
  comm->sendrecv(out.data(), out.size(), (r + 1) % p, in.data(), in.size(), (r + p - 1) % p, 3);
  CHECK(seconds_since(start) >= 0.06);  // 10 ms + 50 ms
  CHECK(in[49999] == 'x');
  CHECK(comm->name().find("emulated link 0.008 Gbit/s + 10000 us") != std::string::npos);
}
