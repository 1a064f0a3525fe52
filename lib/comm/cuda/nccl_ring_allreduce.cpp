#include "comm/cuda/nccl_ring_allreduce.h"

#include <utility>  // swap

#include "backend/cuda/cuda_allocator.h"  // device_allocator
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"  // set_device
#include "core/error.h"

namespace dtrain {

NcclRingAllreduce::NcclRingAllreduce(NcclComm& comm, const DeviceCodec& codec, int64_t max_elements)
    : comm_(comm), codec_(codec), max_elements_(max_elements) {
  cuda::set_device(comm.device());
  const int p = comm.size();
  const int64_t block = (max_elements + p - 1) / p;
  const Shape bytes{static_cast<int64_t>(codec.encoded_bytes(block))};
  send_buf_ = Tensor::empty(bytes, DType::u8, cuda::device_allocator(comm.device()));
  recv_buf_ = Tensor::empty(bytes, DType::u8, cuda::device_allocator(comm.device()));
  // At most 2(p−1) + 1 codec calls per run (each step decodes; the all-gather's owner encodes
  // and decodes once, the reduce-scatter encodes every step): two events each.
  events_.resize(2 * (3 * static_cast<size_t>(p) + 2));
  for (cudaEvent_t& e : events_) DTRAIN_CUDA_CHECK(cudaEventCreate(&e));
}

NcclRingAllreduce::~NcclRingAllreduce() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void NcclRingAllreduce::codec_begin() {
  DTRAIN_CHECK(events_used_ + 2 <= events_.size()) << "ring: out of timing events";
  DTRAIN_CUDA_CHECK(cudaEventRecord(events_[events_used_], comm_.stream()));
}
void NcclRingAllreduce::codec_end() {
  DTRAIN_CUDA_CHECK(cudaEventRecord(events_[events_used_ + 1], comm_.stream()));
  events_used_ += 2;
}

double NcclRingAllreduce::last_codec_seconds() const {
  double seconds = 0;
  for (size_t i = 0; i + 1 < events_used_; i += 2) {
    float ms = 0;
    DTRAIN_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
    seconds += ms * 1e-3;
  }
  return seconds;
}

namespace {
int mod(int c, int p) {
  return ((c % p) + p) % p;
}
}  // namespace

// The same steps as RingAllreduce::reduce_blocks: after p−1 steps rank r holds the sum of block r.
void NcclRingAllreduce::enqueue_reduce_blocks(float* data, int64_t n) {
  const int p = comm_.size(), r = comm_.rank();
  const cudaStream_t stream = comm_.stream();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  auto* send = send_buf_.data<uint8_t>();
  auto* recv = recv_buf_.data<uint8_t>();
  for (int s = 0; s < p - 1; ++s) {
    const RingBlock out = ring_block(n, mod(r - s - 1, p), p);
    const RingBlock in = ring_block(n, mod(r - s - 2, p), p);
    codec_begin();
    codec_.encode(data + out.begin, out.count, send, stream);
    codec_end();
    comm_.enqueue_sendrecv(send, codec_.encoded_bytes(out.count), right, recv,
                           codec_.encoded_bytes(in.count), left);
    codec_begin();
    codec_.decode_add(recv, in.count, data + in.begin, stream);
    codec_end();
  }
}

// The owned block rounded through the codec, as the all-gather of an all-reduce delivers it; its
// encoding stays in send_buf_ for that all-gather.
void NcclRingAllreduce::enqueue_round_own(float* data, int64_t n) {
  const RingBlock own = ring_block(n, comm_.rank(), comm_.size());
  auto* send = send_buf_.data<uint8_t>();
  codec_begin();
  codec_.encode(data + own.begin, own.count, send, comm_.stream());
  codec_.decode(send, own.count, data + own.begin, comm_.stream());
  codec_end();
}

void NcclRingAllreduce::enqueue(float* data, int64_t n) {
  DTRAIN_CHECK(n <= max_elements_) << "all-reduce of " << n << " > " << max_elements_;
  events_used_ = 0;
  const int p = comm_.size(), r = comm_.rank();
  if (p == 1 || n == 0) return;
  cuda::set_device(comm_.device());
  const cudaStream_t stream = comm_.stream();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  enqueue_reduce_blocks(data, n);
  // All-gather: the owner encodes its block once and keeps the decoded value, as everyone else
  // will; each rank forwards what it received in the step before.
  enqueue_round_own(data, n);
  auto* send = send_buf_.data<uint8_t>();
  auto* recv = recv_buf_.data<uint8_t>();
  for (int s = 0; s < p - 1; ++s) {
    const RingBlock out = ring_block(n, mod(r - s, p), p);
    const RingBlock in = ring_block(n, mod(r - s - 1, p), p);
    comm_.enqueue_sendrecv(send, codec_.encoded_bytes(out.count), right, recv,
                           codec_.encoded_bytes(in.count), left);
    codec_begin();
    codec_.decode(recv, in.count, data + in.begin, stream);
    codec_end();
    std::swap(send, recv);  // forward the received block unchanged (stream order protects it)
  }
}

void NcclRingAllreduce::enqueue_reduce_scatter(float* data, int64_t n) {
  DTRAIN_CHECK(n <= max_elements_) << "reduce-scatter of " << n << " > " << max_elements_;
  events_used_ = 0;
  if (comm_.size() == 1 || n == 0) return;
  cuda::set_device(comm_.device());
  enqueue_reduce_blocks(data, n);
  enqueue_round_own(data, n);
}

}  // namespace dtrain
