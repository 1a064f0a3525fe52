#include "comm/stage_channel.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>  // sleep_for: waits that leave the core to compute

#include "comm/tags.h"           // kStageActivation, kStageGradient
#include "comm/wait_watchdog.h"  // WaitGuard: a polled wait is bounded too
#include "core/error.h"

namespace dtrain {

namespace {
// Waits for `r` without spinning: pipeline ranks often wait a whole stage's compute for their
// peer, and a spinning wait would take a core from a rank that computes (two ranks, two cores).
void wait_politely(CommRequest& r, int peer) {
  WaitGuard guard("a pipeline transfer", peer);
  while (!r.test()) std::this_thread::sleep_for(kStagePollPeriod);
}
}  // namespace

std::string StageMessage::describe() const {
  return fmt::format("{} of minibatch {} ({} rows, weight version {}, {} floats)",
                     kind == activation ? "activation"
                     : kind == gradient ? "gradient"
                                        : "message?",
                     minibatch, rows, version, elements);
}

StageChannel::StageChannel(Comm& comm, int peer, StageMessage::Kind kind, CommThread* sender)
    : comm_(comm),
      sender_(sender),
      peer_(peer),
      tag_(kind == StageMessage::activation ? tags::kStageActivation : tags::kStageGradient) {
  DTRAIN_CHECK(peer >= 0 && peer < comm.size() && peer != comm.rank())
      << "stage channel to rank " << peer << " from rank " << comm.rank();
}

StageChannel::~StageChannel() {
  for (Pending& p : sends_) {
    if (p.sent.valid()) p.sent.wait();
    if (p.header_request) p.header_request->wait();
    if (p.payload_request) p.payload_request->wait();
  }
  for (Pending& p : receives_) {
    if (p.header_request) p.header_request->wait();
    if (p.payload_request) p.payload_request->wait();
  }
}

void StageChannel::send(const StageMessage& header, const Tensor& payload) {
  DTRAIN_CHECK(payload.device() == Device::cpu && payload.numel() >= header.elements)
      << "stage message payload: " << header.elements << " elements from a host tensor of "
      << payload.numel();
  sends_.push_back({header, nullptr, nullptr, payload, {}});
  Pending& p = sends_.back();  // a deque: stays where it is while later sends are added
  // f32, or bf16 between the stages of a bf16 model: the receiver's buffer has the same dtype.
  const size_t bytes = static_cast<size_t>(header.elements) * dtype_size(payload.dtype());
  if (sender_) {
    p.sent = sender_->submit([this, &p, bytes] {
      auto h = comm_.isend(&p.header, sizeof(StageMessage), peer_, tag_);
      auto d = comm_.isend(p.payload.raw(), bytes, peer_, tag_);
      wait_politely(*h, peer_);
      wait_politely(*d, peer_);
    });
  } else {
    p.header_request = comm_.isend(&p.header, sizeof(StageMessage), peer_, tag_);
    p.payload_request = comm_.isend(payload.raw(), bytes, peer_, tag_);
  }
  bytes_sent_ += static_cast<int64_t>(bytes + sizeof(StageMessage));
  // Completed sends leave the window (their buffers are free again).
  while (!sends_.empty() && done(sends_.front())) sends_.pop_front(), ++completed_;
}

bool StageChannel::done(Pending& p) {
  if (p.sent.valid()) return p.sent.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  return p.header_request->test() && p.payload_request->test();
}

void StageChannel::wait_sends() {
  wait_sends(sends_started());
}

void StageChannel::wait_sends(int64_t count) {
  while (!sends_.empty() && completed_ < count) {
    Pending& p = sends_.front();
    if (p.sent.valid()) {
      p.sent.get();  // rethrows the sender thread's failure
    } else {
      wait_politely(*p.header_request, peer_);
      wait_politely(*p.payload_request, peer_);
    }
    sends_.pop_front();
    ++completed_;
  }
}

void StageChannel::post_receive(const Tensor& payload) {
  DTRAIN_CHECK(payload.device() == Device::cpu) << "stage message payload not on the host";
  receives_.push_back({StageMessage{}, nullptr, nullptr, payload, {}});
  Pending& p = receives_.back();
  p.header_request = comm_.irecv(&p.header, sizeof(StageMessage), peer_, tag_);
  p.payload_request = comm_.irecv(payload.raw(), payload.bytes(), peer_, tag_);
}

StageMessage StageChannel::receive(const StageMessage& expected, const Tensor& payload) {
  Tensor t = payload;
  const StageMessage got = receive(expected, &t);
  DTRAIN_CHECK(t.raw() == payload.raw())
      << "stage channel: a receive was posted into another buffer than the one given";
  return got;
}

StageMessage StageChannel::receive(const StageMessage& expected, Tensor* payload) {
  if (receives_.empty()) post_receive(*payload);
  Pending& p = receives_.front();  // MPI writes into it: wait before it goes
  *payload = p.payload;
  wait_politely(*p.header_request, peer_);
  wait_politely(*p.payload_request, peer_);
  const StageMessage got = p.header;
  const int64_t capacity = p.payload.numel();
  receives_.pop_front();
  StageMessage want = expected;
  want.end = got.end;
  want.loss = got.loss;
  if (want.rows == 0 && got.rows > 0 && got.elements <= capacity) {
    want.rows = got.rows;  // any rows (an evaluation's last batch): the header says how many
    want.elements = got.elements;
  }
  if (!(got == want))
    throw Error(fmt::format("pipeline: rank {} expected from rank {} the {}, but received the {}",
                            comm_.rank(), peer_, expected.describe(), got.describe()));
  return got;
}

}  // namespace dtrain
