#include "comm/stage_channel.h"

#include <fmt/format.h>

#include "comm/tags.h"  // kStageActivation, kStageGradient
#include "core/error.h"

namespace dtrain {

std::string StageMessage::describe() const {
  return fmt::format("{} of minibatch {} ({} rows, weight version {}, {} floats)",
                     kind == activation ? "activation"
                     : kind == gradient ? "gradient"
                                        : "message?",
                     minibatch, rows, version, elements);
}

StageChannel::StageChannel(Comm& comm, int peer, StageMessage::Kind kind)
    : comm_(comm),
      peer_(peer),
      tag_(kind == StageMessage::activation ? tags::kStageActivation : tags::kStageGradient) {
  DTRAIN_CHECK(peer >= 0 && peer < comm.size() && peer != comm.rank())
      << "stage channel to rank " << peer << " from rank " << comm.rank();
}

StageChannel::~StageChannel() {
  for (Pending& p : sends_) {
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
      << "stage message payload: " << header.elements << " floats from a host tensor of "
      << payload.numel();
  sends_.push_back({header, nullptr, nullptr, payload});
  Pending& p = sends_.back();
  p.header_request = comm_.isend(&p.header, sizeof(StageMessage), peer_, tag_);
  const size_t bytes = static_cast<size_t>(header.elements) * sizeof(float);
  p.payload_request = comm_.isend(payload.raw(), bytes, peer_, tag_);
  bytes_sent_ += static_cast<int64_t>(bytes + sizeof(StageMessage));
  // Completed sends leave the window (their buffers are free again).
  while (!sends_.empty() && sends_.front().header_request->test() &&
         sends_.front().payload_request->test())
    sends_.pop_front();
}

void StageChannel::wait_sends() {
  for (Pending& p : sends_) {
    p.header_request->wait();
    p.payload_request->wait();
  }
  sends_.clear();
}

void StageChannel::post_receive(const Tensor& payload) {
  DTRAIN_CHECK(payload.device() == Device::cpu) << "stage message payload not on the host";
  receives_.push_back({StageMessage{}, nullptr, nullptr, payload});
  Pending& p = receives_.back();
  p.header_request = comm_.irecv(&p.header, sizeof(StageMessage), peer_, tag_);
  p.payload_request = comm_.irecv(payload.raw(), payload.bytes(), peer_, tag_);
}

StageMessage StageChannel::receive(const StageMessage& expected, const Tensor& payload) {
  if (receives_.empty()) post_receive(payload);
  Pending& p = receives_.front();  // MPI writes into it: wait before it goes
  p.header_request->wait();
  p.payload_request->wait();
  const StageMessage got = p.header;
  const int64_t capacity = p.payload.numel();
  receives_.pop_front();
  StageMessage want = expected;
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
