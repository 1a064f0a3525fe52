#include "comm/ring_allreduce.h"

#include <cstring>  // memcpy

#include "comm/tags.h"           // tags::kRingStep
#include "comm/wait_watchdog.h"  // WaitContext: a timeout names the step
#include "core/error.h"
#include "core/phase.h"  // PhaseTimer: the codec's spans
#include "core/timer.h"  // Clock

namespace dtrain {

RingAllreduce::RingAllreduce(Comm& comm, const Codec& codec, int64_t max_elements)
    : comm_(comm), codec_(codec), max_elements_(max_elements) {
  const int p = comm.size();
  const int64_t block = (max_elements + p - 1) / p;
  send_buf_.resize(codec.encoded_bytes(block));
  recv_buf_.resize(codec.encoded_bytes(block));
}

AllreduceTimes RingAllreduce::run(float* data, int64_t n) {
  DTRAIN_CHECK(n <= max_elements_) << "all-reduce of " << n << " > " << max_elements_;
  AllreduceTimes t;
  const int p = comm_.size(), r = comm_.rank();
  if (p == 1 || n == 0) return t;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  auto begin = [&](int c) { return n * c / p; };
  auto length = [&](int c) { return begin(c + 1) - begin(c); };
  auto mod = [p](int c) { return ((c % p) + p) % p; };
  auto timed = [](double* sink, auto&& f) {
    const auto start = Clock::now();
    f();
    *sink += seconds_since(start);
  };
  // The codec's time is a phase of its own: a compress span in the trace (inside the comm
  // thread's request), compress_s in timing.csv.
  auto coding = [](double* sink, auto&& f) {
    PhaseTimer timer(*sink, Phase::compress);
    f();
  };

  // Without compression the blocks travel straight from and into `data`: no encode copies.
  const bool raw = codec_.name() == "none";
  // Steps are numbered over both halves (1 .. 2(p−1)) in a timeout's message.
  WaitContext step("ring all-reduce");
  // Reduce-scatter: after p−1 steps rank r holds the full sum of block r+1.
  for (int s = 0; s < p - 1; ++s) {
    step.set_step(s + 1);
    const int out = mod(r - s), in = mod(r - s - 1);
    const void* outgoing = data + begin(out);
    if (!raw) {
      coding(&t.compress_s,
             [&] { codec_.encode(data + begin(out), length(out), send_buf_.data()); });
      outgoing = send_buf_.data();
    }
    timed(&t.comm_s, [&] {
      comm_.sendrecv(outgoing, codec_.encoded_bytes(length(out)), right, recv_buf_.data(),
                     codec_.encoded_bytes(length(in)), left, tags::kRingStep);
    });
    coding(&t.compress_s,
           [&] { codec_.decode_add(recv_buf_.data(), length(in), data + begin(in)); });
  }
  // All-gather: the owner encodes its block once (and keeps the decoded value, as everyone
  // else will); each rank forwards what it received in the step before.
  if (raw) {
    for (int s = 0; s < p - 1; ++s) {
      step.set_step(p + s);
      const int out = mod(r + 1 - s), in = mod(r - s);
      timed(&t.comm_s, [&] {
        comm_.sendrecv(data + begin(out), sizeof(float) * length(out), right, data + begin(in),
                       sizeof(float) * length(in), left, tags::kRingStep);
      });
    }
    return t;
  }
  const int own = mod(r + 1);
  coding(&t.compress_s, [&] {
    codec_.encode(data + begin(own), length(own), send_buf_.data());
    codec_.decode(send_buf_.data(), length(own), data + begin(own));
  });
  for (int s = 0; s < p - 1; ++s) {
    step.set_step(p + s);
    const int out = mod(r + 1 - s), in = mod(r - s);
    timed(&t.comm_s, [&] {
      comm_.sendrecv(send_buf_.data(), codec_.encoded_bytes(length(out)), right, recv_buf_.data(),
                     codec_.encoded_bytes(length(in)), left, tags::kRingStep);
    });
    coding(&t.compress_s, [&] { codec_.decode(recv_buf_.data(), length(in), data + begin(in)); });
    std::swap(send_buf_, recv_buf_);  // forward the received block unchanged
  }
  return t;
}

}  // namespace dtrain
