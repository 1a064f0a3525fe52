// Checkpoints (docs/architecture.md §3, `checkpoint:` and `--resume`): each rank's complete
// training state in OUT/checkpoints/<point>/rank-NNNNN.bin, written atomically (temporary name,
// fsync, rename), one CRC-32 per buffer, and a manifest.yaml that rank 0 writes last, once every
// rank's file is in place: a checkpoint without a manifest was never finished and is ignored. The
// resolved config beside it says what run wrote it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm.h"              // Comm: the ranks write and choose together
#include "sched/scheduler_state.h"  // SchedulerState: what a rank saves

namespace dtrain {

// Where training continues: `iteration` of `epoch` (0-based; iteration 0 is the epoch's start).
struct CheckpointPoint {
  int epoch = 0;
  int64_t iteration = 0;
  auto operator<=>(const CheckpointPoint&) const = default;
  // "after epoch 2" or "epoch 3, after iteration 50" (1-based epochs).
  std::string describe() const;
};

// One rank's file: every buffer, counter and text of `state`. The layout (little-endian):
// "DTRAINCK", u32 version, u32 entries; per entry u8 kind (0 f32 buffer, 1 i64 counter, 2 text),
// u32 name length, name, u64 payload bytes, u32 CRC-32 of the payload, payload; u32 CRC-32 of
// everything before it.
std::string encode_state(const SchedulerState& state);
// The state of a file's bytes; throws Error naming what is damaged (`what` names the file).
SchedulerState decode_state(const std::string& bytes, const std::string& what);

// The keys a resumed run may change: train.epochs, train.max_iterations, output.*, checkpoint.*.
// Returns the first other dotted key whose value differs between two resolved configs (YAML
// text), or empty when they agree.
std::string first_config_difference(const std::string& saved_yaml, const std::string& yaml);

// The newest finished checkpoint (one with its manifest) under `root` (OUT/checkpoints), or
// nothing. Its files are not read: a damaged one is found only when --resume reads it.
std::optional<std::string> newest_finished_checkpoint(const std::string& root);

struct CheckpointOptions {
  std::string dir;          // OUT/checkpoints
  std::string config_yaml;  // the resolved config of this run
  int keep = 2;
};

class CheckpointStore {
 public:
  CheckpointStore(Comm& comm, CheckpointOptions options);
  // A collective: every rank writes its `state` as the checkpoint of `at`; rank 0 writes the
  // manifest once all have, then deletes all but the newest `keep`. Returns this rank's seconds.
  double write(const CheckpointPoint& at, const SchedulerState& state);
  // A collective: the newest checkpoint that every rank reads intact, into `state`. A damaged
  // one is named in the log and skipped for the one before. InputError when the newest was
  // written by another number of ranks or another config (naming the key).
  std::optional<CheckpointPoint> read_newest(SchedulerState& state);

 private:
  Comm& comm_;
  CheckpointOptions options_;
  int writes_ = 0;  // checkpoints this process has written (the tests' kill hook)
};

}  // namespace dtrain
