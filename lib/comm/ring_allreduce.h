// Ring all-reduce with the codec inside (Pipe-SGD paper, Fig. 3b; docs/architecture.md, decision
// 4): reduce-scatter then all-gather over the ring, each rank sending 2(p−1)/p of the buffer. Every
// block is encoded before it is sent and decoded — and, in the reduce-scatter, summed — after it is
// received. In the all-gather a reduced block is encoded once by its owner and forwarded as
// received, and the owner keeps the decoded value too, so every rank ends with bit-identical
// results whatever the codec.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.h"       // Comm: point-to-point
#include "compress/codec.h"  // Codec

namespace dtrain {

struct AllreduceTimes {
  double comm_s = 0;      // in sendrecv
  double compress_s = 0;  // encoding and decoding
};

class RingAllreduce {
 public:
  // Scratch for blocks of up to ⌈max_elements / p⌉ floats is allocated here, once.
  RingAllreduce(Comm& comm, const Codec& codec, int64_t max_elements);
  // In-place sum over all ranks of data[0, n), n ≤ max_elements, host memory.
  AllreduceTimes run(float* data, int64_t n);
  const Codec& codec() const { return codec_; }

 private:
  Comm& comm_;
  const Codec& codec_;
  int64_t max_elements_;
  std::vector<char> send_buf_, recv_buf_;
};

}  // namespace dtrain
