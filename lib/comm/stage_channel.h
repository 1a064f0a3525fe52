// StageChannel: the activations or gradients one pipeline rank sends another (PipeDream,
// each message a header — what it is, which minibatch, how many rows, the weight
// version — followed by its payload. The receiver says what it expects, and a message that is
// not it is a runtime error naming both, never a silently wrong loss (DeepSpeed #5729 computed
// losses from the outputs and labels of different batches). Sends are non-blocking and
// receives are posted before they are needed, so that a payload above MPI's eager limit never
// waits for its receiver to arrive at the matching call, and one side's large send never holds
// the other side's message behind it.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include <future>

#include "comm/comm.h"         // Comm, CommRequest
#include "comm/comm_thread.h"  // CommThread: sends off the compute thread
#include "core/tensor.h"       // Tensor: host f32 payloads

namespace dtrain {

// How often a waiting rank tests its transfers: a sleep in between leaves the core to the
// compute thread of a rank that shares it (dtrain's prediction counts the delay it costs).
inline constexpr std::chrono::microseconds kStagePollPeriod{50};

struct StageMessage {
  enum Kind : int32_t { activation = 1, gradient = 2 };
  int32_t kind = activation;
  int32_t minibatch = -1;
  int32_t rows = 0;
  int32_t version = 0;   // the weight version (vertical sync: the input stage's at admission)
  int64_t elements = 0;  // of the payload
  // An early end of the run (a signal): the sender's run ends before minibatch end − 1; 0: none.
  // Carried, not checked: the receiver learns it from whichever message brings it first.
  int32_t end = 0;
  // A gradient's: the output stage's mean loss of its minibatch, passed back stage by stage so
  // that the input stage's rank 0 shows it in the progress line; −1: none. Carried, not checked.
  float loss = -1;
  bool operator==(const StageMessage&) const = default;
  std::string describe() const;
};

class StageChannel {
 public:
  // Messages of `kind` between this rank and `peer` on `comm`, both directions use the tag of
  // the kind (activations and gradients never match each other).
  // With a `sender` thread, sends run there (MPI_THREAD_MULTIPLE): the compute thread never
  // waits for a transfer (nor for an emulated link's pacing) until it must reuse the payload.
  StageChannel(Comm& comm, int peer, StageMessage::Kind kind, CommThread* sender = nullptr);
  ~StageChannel();  // waits for what is in flight
  StageChannel(const StageChannel&) = delete;
  StageChannel& operator=(const StageChannel&) = delete;

  // Starts sending `header` and `payload` (host f32, header.elements of them); the payload must
  // stay unchanged until the send completes (wait_sends, or the next sends past the window).
  void send(const StageMessage& header, const Tensor& payload);
  // Waits until every send started so far has completed.
  void wait_sends();
  // Waits until the first `count` sends of this channel have completed.
  void wait_sends(int64_t count);
  int64_t sends_started() const { return completed_ + static_cast<int64_t>(sends_.size()); }
  // Posts the receive of the next message into `payload` (host f32, its size the largest
  // expected); receives complete in the order they were posted.
  void post_receive(const Tensor& payload);
  // Completes the oldest posted receive and checks its header against `expected` (all fields;
  // `elements` may be fewer than the posted payload's). Throws Error naming the peer, what was
  // expected and what arrived. Posts one itself into `payload` if none is posted. `expected.rows`
  // 0 accepts any rows that fit the payload (their count comes with the header).
  StageMessage receive(const StageMessage& expected, const Tensor& payload);
  // The same, where the message lands in the oldest posted receive's payload: `*payload` (posted
  // if none is) is set to it.
  StageMessage receive(const StageMessage& expected, Tensor* payload);
  int posted() const { return static_cast<int>(receives_.size()); }

  int peer() const { return peer_; }
  int64_t bytes_sent() const { return bytes_sent_; }

 private:
  struct Pending {
    StageMessage header;
    std::unique_ptr<CommRequest> header_request, payload_request;
    Tensor payload;
    std::future<void> sent;  // a send on the sender thread
  };
  static bool done(Pending& p);
  Comm& comm_;
  CommThread* sender_;
  int peer_, tag_;
  std::deque<Pending> sends_, receives_;
  int64_t bytes_sent_ = 0;
  int64_t completed_ = 0;  // sends completed and gone from sends_
};

}  // namespace dtrain
