// StageChannel between ranks 0 and 1: headers checked on arrival, payloads above MPI's eager
// limit sent both ways at once without a deadlock, and a message other than the expected one is
// an error naming both.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "comm/mpi_comm.h"
#include "comm/stage_channel.h"
#include "core/error.h"

using namespace dtrain;

namespace {

constexpr int64_t kBig = 1 << 20;  // 4 MiB of floats: far above any eager limit

StageMessage message(StageMessage::Kind kind, int minibatch, int64_t elements) {
  return {kind, minibatch, 8, minibatch / 2, elements};
}

float value(int minibatch, int64_t i) {
  return static_cast<float>(minibatch * 1000 + i % 997);
}

}  // namespace

TEST_CASE("stage channels: activations one way, gradients the other, at once, checked") {
  auto world = make_mpi_comm();
  if (world->size() < 2 || world->rank() > 1) return;
  const int peer = 1 - world->rank();
  // Rank 0 sends activations and receives gradients; rank 1 the reverse — both send first and
  // receive after (the first receive posted early, the others when needed), which deadlocks
  // with blocking sends of this size.
  const bool forward = world->rank() == 0;
  StageChannel out(*world, peer, forward ? StageMessage::activation : StageMessage::gradient);
  StageChannel in(*world, peer, forward ? StageMessage::gradient : StageMessage::activation);
  const StageMessage::Kind incoming = forward ? StageMessage::gradient : StageMessage::activation;
  constexpr int kMessages = 3;
  std::vector<Tensor> sent, received;
  for (int b = 0; b < kMessages; ++b) {
    sent.push_back(Tensor::empty({kBig}));
    for (int64_t i = 0; i < kBig; ++i) sent[b].data<float>()[i] = value(b, i);
    received.push_back(Tensor::empty({kBig}));
  }
  in.post_receive(received[0]);
  for (int b = 0; b < kMessages; ++b)
    out.send(message(forward ? StageMessage::activation : StageMessage::gradient, b, kBig),
             sent[b]);
  for (int b = 0; b < kMessages; ++b) {
    const StageMessage got = in.receive(message(incoming, b, kBig), received[b]);
    CHECK(got.minibatch == b);
    int wrong = 0;
    for (int64_t i = 0; i < kBig; ++i) wrong += received[b].data<float>()[i] != value(b, i);
    CHECK(wrong == 0);
  }
  out.wait_sends();
  CHECK(out.bytes_sent() == kMessages * (kBig * 4 + static_cast<int64_t>(sizeof(StageMessage))));
}

TEST_CASE("stage channels: the wrong minibatch is an error naming what was expected") {
  auto world = make_mpi_comm();
  if (world->size() < 2 || world->rank() > 1) return;
  const int peer = 1 - world->rank();
  Tensor payload = Tensor::empty({16});
  for (int64_t i = 0; i < 16; ++i) payload.data<float>()[i] = 1;
  if (world->rank() == 0) {
    StageChannel out(*world, peer, StageMessage::activation);
    out.send(message(StageMessage::activation, 5, 16), payload);  // 4 was due
    out.wait_sends();
  } else {
    StageChannel in(*world, peer, StageMessage::activation);
    std::string error;
    try {
      in.receive(message(StageMessage::activation, 4, 16), payload);
    } catch (const Error& e) {
      error = e.what();
    }
    CHECK(error ==
          "pipeline: rank 1 expected from rank 0 the activation of minibatch 4 (8 rows, weight "
          "version 2, 16 floats), but received the activation of minibatch 5 (8 rows, weight "
          "version 2, 16 floats)");
  }
}
