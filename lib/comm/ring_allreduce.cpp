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
  // Uncompressed, blocks are sent from the data itself: only the received one needs room.
  if (codec.name() != "none") send_buf_.resize(codec.encoded_bytes(block));
  recv_buf_.resize(codec.encoded_bytes(block));
}

namespace {

int mod(int c, int p) {
  return ((c % p) + p) % p;
}

template <class F>
void timed(double* sink, F&& f) {
  const auto start = Clock::now();
  f();
  *sink += seconds_since(start);
}

// The codec's time is a phase of its own: a compress span in the trace (inside the comm thread's
// request), compress_s in timing.csv.
template <class F>
void coding(double* sink, F&& f) {
  PhaseTimer timer(*sink, Phase::compress);
  f();
}

}  // namespace

void RingAllreduce::reduce_blocks(float* data, int64_t n, AllreduceTimes& t) {
  const int p = comm_.size(), r = comm_.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  auto block = [&](int c) { return ring_block(n, c, p); };
  // Without compression the blocks travel straight from and into `data`: no encode copies.
  const bool raw = codec_.name() == "none";
  WaitContext step("ring reduce-scatter");
  // After p−1 steps rank r holds the full sum of block r: at step s it sends block r−s−1 (its
  // own partial sum of it) and adds what its left neighbour sends of block r−s−2.
  for (int s = 0; s < p - 1; ++s) {
    step.set_step(s + 1);
    const RingBlock out = block(mod(r - s - 1, p)), in = block(mod(r - s - 2, p));
    const void* outgoing = data + out.begin;
    if (!raw) {
      coding(&t.compress_s, [&] { codec_.encode(data + out.begin, out.count, send_buf_.data()); });
      outgoing = send_buf_.data();
    }
    timed(&t.comm_s, [&] {
      comm_.sendrecv(outgoing, codec_.encoded_bytes(out.count), right, recv_buf_.data(),
                     codec_.encoded_bytes(in.count), left, tags::kRingStep);
    });
    coding(&t.compress_s, [&] { codec_.decode_add(recv_buf_.data(), in.count, data + in.begin); });
  }
}

void RingAllreduce::round_own_block(float* data, int64_t n, AllreduceTimes& t) {
  const RingBlock own = ring_block(n, comm_.rank(), comm_.size());
  coding(&t.compress_s, [&] {
    codec_.encode(data + own.begin, own.count, send_buf_.data());
    codec_.decode(send_buf_.data(), own.count, data + own.begin);
  });
}

AllreduceTimes RingAllreduce::run(float* data, int64_t n) {
  DTRAIN_CHECK(n <= max_elements_) << "all-reduce of " << n << " > " << max_elements_;
  AllreduceTimes t;
  const int p = comm_.size(), r = comm_.rank();
  if (p == 1 || n == 0) return t;
  reduce_blocks(data, n, t);
  if (codec_.name() == "none") {
    const AllreduceTimes g = all_gather(data, n);
    t.comm_s += g.comm_s;
    return t;
  }
  // All-gather: the owner encodes its block once (and keeps the decoded value, as everyone
  // else will); each rank forwards what it received in the step before.
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  auto block = [&](int c) { return ring_block(n, c, p); };
  round_own_block(data, n, t);  // its encoding stays in send_buf_, the first to send
  WaitContext step("ring all-gather");
  for (int s = 0; s < p - 1; ++s) {
    step.set_step(s + 1);
    const RingBlock out = block(mod(r - s, p)), in = block(mod(r - s - 1, p));
    timed(&t.comm_s, [&] {
      comm_.sendrecv(send_buf_.data(), codec_.encoded_bytes(out.count), right, recv_buf_.data(),
                     codec_.encoded_bytes(in.count), left, tags::kRingStep);
    });
    coding(&t.compress_s, [&] { codec_.decode(recv_buf_.data(), in.count, data + in.begin); });
    std::swap(send_buf_, recv_buf_);  // forward the received block unchanged
  }
  return t;
}

AllreduceTimes RingAllreduce::reduce_scatter(float* data, int64_t n) {
  DTRAIN_CHECK(n <= max_elements_) << "reduce-scatter of " << n << " > " << max_elements_;
  AllreduceTimes t;
  const int p = comm_.size();
  if (p == 1 || n == 0) return t;
  reduce_blocks(data, n, t);
  // The value run() would deliver: its all-gather sends the owned block through the codec.
  if (codec_.name() != "none") round_own_block(data, n, t);
  return t;
}

AllreduceTimes RingAllreduce::all_gather(float* data, int64_t n) {
  AllreduceTimes t;
  const int p = comm_.size(), r = comm_.rank();
  if (p == 1 || n == 0) return t;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  WaitContext step("ring all-gather");
  // Rank r starts with its own block r and forwards, at step s, the block it received at s − 1.
  for (int s = 0; s < p - 1; ++s) {
    step.set_step(s + 1);
    const RingBlock out = ring_block(n, mod(r - s, p), p), in = ring_block(n, mod(r - s - 1, p), p);
    timed(&t.comm_s, [&] {
      comm_.sendrecv(data + out.begin, sizeof(float) * out.count, right, data + in.begin,
                     sizeof(float) * in.count, left, tags::kRingStep);
    });
  }
  return t;
}

}  // namespace dtrain
