// The timing model's test inputs, shared by its tests (tests/plan) and those of the algorithms'
// rows (tests/sched/test_timing_rows.cpp): four ranks on a fast link and two codecs.
#pragma once
#include "plan/timing_model.h"

namespace dtrain::test {

inline CodecCost none() {
  CodecCost c;
  c.name = "none";
  c.encode_s = c.decode_s = c.decode_add_s = 0.25e-9;
  return c;
}

inline CodecCost quantize8() {
  CodecCost c;
  c.name = "quantize8";
  c.encode_s = 1e-9, c.decode_s = 0.5e-9, c.decode_add_s = 0.5e-9;
  c.bytes_per_element = 1, c.header_bytes = 4;
  return c;
}

// p = 4 ranks on a 10 us, 1 ns/B link (no emulation terms); 1M floats; 3.5 ms of compute.
inline TimingInputs four_ranks() {
  TimingInputs in;
  in.l_for = 1e-3, in.l_back = 2e-3, in.l_up = 0.5e-3;
  in.n = 1'000'000;
  in.p = 4;
  in.global_batch = 128;
  in.link.latency_s = 10e-6;
  in.link.bandwidth_bytes_per_s = 1e9;  // β = 1 ns/B
  in.gamma_s_per_byte = 0.5e-9;
  in.sync_s = 20e-6;
  in.codecs = {none(), quantize8()};
  return in;
}

// Eq. 5's communication term for `none`: 2·3·10us + 2·(3/4)·4 MB·1 ns + (3/4)·4 MB·0.5 ns + S.
constexpr double kCommNone = 60e-6 + 6e-3 + 1.5e-3 + 20e-6;  // 7.58 ms

}  // namespace dtrain::test
