// StageChannel: the activations or gradients one pipeline rank sends another (PipeDream,
// issue 16), each message a header — what it is, which minibatch, how many rows, the weight
// version — followed by its payload. The receiver says what it expects, and a message that is
// not it is a runtime error naming both, never a silently wrong loss (DeepSpeed #5729 computed
// losses from the outputs and labels of different batches). Sends are non-blocking and
// receives are posted before they are needed, so that a payload above MPI's eager limit never
// waits for its receiver to arrive at the matching call, and one side's large send never holds
// the other side's message behind it.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "comm/comm.h"    // Comm, CommRequest
#include "core/tensor.h"  // Tensor: host f32 payloads

namespace dtrain {

struct StageMessage {
  enum Kind : int32_t { activation = 1, gradient = 2 };
  int32_t kind = activation;
  int32_t minibatch = -1;
  int32_t rows = 0;
  int32_t version = 0;   // the weight version (vertical sync: the input stage's at admission)
  int64_t elements = 0;  // of the payload
  bool operator==(const StageMessage&) const = default;
  std::string describe() const;
};

class StageChannel {
 public:
  // Messages of `kind` between this rank and `peer` on `comm`, both directions use the tag of
  // the kind (activations and gradients never match each other).
  StageChannel(Comm& comm, int peer, StageMessage::Kind kind);
  ~StageChannel();  // waits for what is in flight
  StageChannel(const StageChannel&) = delete;
  StageChannel& operator=(const StageChannel&) = delete;

  // Starts sending `header` and `payload` (host f32, header.elements of them); the payload must
  // stay unchanged until the send completes (wait_sends, or the next sends past the window).
  void send(const StageMessage& header, const Tensor& payload);
  // Waits until every send started so far has completed.
  void wait_sends();
  // Posts the receive of the next message into `payload` (host f32, its size the largest
  // expected); receives complete in the order they were posted.
  void post_receive(const Tensor& payload);
  // Completes the oldest posted receive and checks its header against `expected` (all fields;
  // `elements` may be fewer than the posted payload's). Throws Error naming the peer, what was
  // expected and what arrived. Posts one itself into `payload` if none is posted. `expected.rows`
  // 0 accepts any rows that fit the payload (their count comes with the header).
  StageMessage receive(const StageMessage& expected, const Tensor& payload);

  int peer() const { return peer_; }
  int64_t bytes_sent() const { return bytes_sent_; }

 private:
  struct Pending {
    StageMessage header;
    std::unique_ptr<CommRequest> header_request, payload_request;
    Tensor payload;
  };
  Comm& comm_;
  int peer_, tag_;
  std::deque<Pending> sends_, receives_;
  int64_t bytes_sent_ = 0;
};

}  // namespace dtrain
