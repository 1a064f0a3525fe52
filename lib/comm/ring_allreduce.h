// Ring all-reduce with the codec inside (Pipe-SGD paper, Fig. 3b; docs/architecture.md, decision
// 4): reduce-scatter then all-gather over the ring, each rank sending 2(p−1)/p of the buffer. The
// buffer is cut into p blocks, block c = [n·c/p, n·(c+1)/p), and the reduce-scatter leaves block r
// complete on rank r (ring_block); the halves run alone for sharded training (ZeRO). Every
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

// Block c of a buffer of n elements cut for p ranks: [begin, begin + count).
struct RingBlock {
  int64_t begin = 0, count = 0;
};
inline RingBlock ring_block(int64_t n, int c, int p) {
  const int64_t begin = n * c / p;
  return {begin, n * (c + 1) / p - begin};
}

class RingAllreduce {
 public:
  // Scratch for blocks of up to ⌈max_elements / p⌉ floats is allocated here, once.
  RingAllreduce(Comm& comm, const Codec& codec, int64_t max_elements);
  // In-place sum over all ranks of data[0, n), n ≤ max_elements, host memory.
  AllreduceTimes run(float* data, int64_t n);
  // The first half: block rank() of data[0, n) ends as the sum over all ranks, exactly as run()
  // leaves it (with a codec, rounded through it as run's all-gather rounds it); the other blocks
  // hold partial sums.
  AllreduceTimes reduce_scatter(float* data, int64_t n);
  // The second half, uncompressed: every rank's block r of data[0, n) is copied from rank r.
  AllreduceTimes all_gather(float* data, int64_t n);
  const Codec& codec() const { return codec_; }

 private:
  // The reduce-scatter's steps, without rounding the owned block.
  void reduce_blocks(float* data, int64_t n, AllreduceTimes& t);
  // The owned block through the codec (encoded into send_buf_, decoded back in place): what
  // every rank receives of it.
  void round_own_block(float* data, int64_t n, AllreduceTimes& t);

  Comm& comm_;
  const Codec& codec_;
  int64_t max_elements_;
  std::vector<char> send_buf_, recv_buf_;
};

}  // namespace dtrain
