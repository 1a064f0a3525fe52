// A checkpoint file's layout (lib/run/checkpoint.h): what is written is read back exactly, and
// every damage — a flipped bit in any byte, a truncation — is an error that names the file and,
// inside a buffer, the buffer. A resumed config may differ only in the keys that do not change
// the training.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/error.h"  // Error
#include "run/checkpoint.h"

using namespace dtrain;

namespace {

SchedulerState sample_state() {
  SchedulerState s;
  s.put_values("model.parameters", {1.0f, -2.5f, 3.25f, 1e-30f});
  s.put_values("empty", {});
  s.set_counter("model.step", 123456789012345);
  s.set_counter("negative", -7);
  s.set_text("gossip.rng", "1 2 3 some state");
  return s;
}

}  // namespace

TEST_CASE("a state is read back exactly as written") {
  const SchedulerState in = sample_state();
  const SchedulerState out = decode_state(encode_state(in), "f.bin");
  CHECK(out.buffers() == in.buffers());
  CHECK(out.counters() == in.counters());
  CHECK(out.texts() == in.texts());
}

TEST_CASE("every damaged byte is found") {
  const std::string bytes = encode_state(sample_state());
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    CAPTURE(at);
    CHECK_THROWS_WITH_AS(decode_state(damaged, "f.bin"), doctest::Contains("f.bin"), Error);
  }
  for (size_t size = 0; size < bytes.size(); ++size)
    CHECK_THROWS_AS(decode_state(bytes.substr(0, size), "f.bin"), Error);
}

TEST_CASE("a damaged buffer is named") {
  std::string bytes = encode_state(sample_state());
  // The first buffer's payload starts after the header (16), kind, name, size and CRC.
  const size_t payload = 16 + 1 + 4 + std::string("model.parameters").size() + 8 + 4;
  bytes[payload + 5] = static_cast<char>(bytes[payload + 5] ^ 1);
  CHECK_THROWS_WITH(decode_state(bytes, "r.bin"), "r.bin: 'model.parameters' fails its checksum");
}

TEST_CASE("a resumed config may change only the length, the output and the checkpoints") {
  const std::string saved =
      "name: a\noptimizer: {lr: 0.1, momentum: 0.9}\ntrain: {epochs: 2, max_iterations: 0}\n"
      "output: {dir: runs/a}\ncheckpoint: {keep: 2}\n";
  CHECK(first_config_difference(saved, saved) == "");
  CHECK(first_config_difference(
            saved,
            "name: a\noptimizer: {lr: 0.1, momentum: 0.9}\ntrain: {epochs: 5, max_iterations: 9}\n"
            "output: {dir: runs/b}\ncheckpoint: {keep: 9}\n") == "");
  CHECK(first_config_difference(
            saved, "name: a\noptimizer: {lr: 0.2, momentum: 0.9}\ntrain: {epochs: 2}\n") ==
        "optimizer.lr");
  CHECK(first_config_difference(saved, "name: a\noptimizer: {lr: 0.1}\ntrain: {epochs: 2}\n") ==
        "optimizer.momentum");
  CHECK(first_config_difference(
            saved, "name: a\nseed: 4\noptimizer: {lr: 0.1, momentum: 0.9}\ntrain: {epochs: 2}\n") ==
        "seed");
}

TEST_CASE("keys added since a checkpoint was written are no difference at their old meaning") {
  const std::string saved = "name: a\nalgorithm: {name: sync}\nmodel: {name: mlp}\n";
  CHECK(first_config_difference(saved,
                                "name: a\nalgorithm: {name: sync, shard: none}\nmodel: {name: mlp, "
                                "recompute: none}\n") == "");
  CHECK(first_config_difference(saved,
                                "name: a\nalgorithm: {name: sync, shard: optimizer}\nmodel: "
                                "{name: mlp}\n") == "algorithm.shard");
  CHECK(first_config_difference(
            saved, "name: a\nalgorithm: {name: sync}\nmodel: {name: mlp, recompute: blocks}\n") ==
        "model.recompute");
}
