// The ring all-reduce with the codec inside (ring_allreduce.h) on GPU buffers: the same blocks,
// steps and bit-identical results, with the blocks encoded and decoded by GPU kernels and moved
// by NCCL send/receive, all enqueued on the NCCL communicator's stream with no host
// synchronisation between steps (Pipe-SGD Fig. 3b on the GPU).
#pragma once
#include <cuda_runtime_api.h>  // cudaEvent_t

#include <cstdint>
#include <vector>

#include "comm/cuda/nccl_comm.h"         // NcclComm
#include "comm/ring_allreduce.h"         // ring_block: the same blocks
#include "compress/cuda/device_codec.h"  // DeviceCodec
#include "core/tensor.h"

namespace dtrain {

class NcclRingAllreduce {
 public:
  // Device scratch for blocks of up to ⌈max_elements / p⌉ floats is allocated here, once.
  NcclRingAllreduce(NcclComm& comm, const DeviceCodec& codec, int64_t max_elements);
  ~NcclRingAllreduce();
  NcclRingAllreduce(const NcclRingAllreduce&) = delete;
  NcclRingAllreduce& operator=(const NcclRingAllreduce&) = delete;
  // Enqueues the in-place sum of data[0, n) (device memory) on comm.stream().
  void enqueue(float* data, int64_t n);
  // Its first half (RingAllreduce::reduce_scatter): block rank() of data[0, n) ends as enqueue()
  // leaves it. The second half, uncompressed, is NcclComm::enqueue_all_gather_blocks.
  void enqueue_reduce_scatter(float* data, int64_t n);
  // Seconds the GPU spent in the codec kernels of the last enqueue(); the stream must have
  // been synchronised since.
  double last_codec_seconds() const;

 private:
  void enqueue_reduce_blocks(float* data, int64_t n);
  void enqueue_round_own(float* data, int64_t n);
  // Brackets codec work with timing events: one pair per codec call of a run.
  void codec_begin();
  void codec_end();

  NcclComm& comm_;
  const DeviceCodec& codec_;
  int64_t max_elements_;
  Tensor send_buf_, recv_buf_;
  std::vector<cudaEvent_t> events_;
  size_t events_used_ = 0;
};

}  // namespace dtrain
