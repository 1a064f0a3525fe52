// PS-Sync: the centralised baseline of the Pipe-SGD paper (Fig. 2a, "parameter server").
// Every rank computes the gradient of its share of the global batch and pushes it to the
// parameter server (rank 0, which also computes its own share); the server sums the pushes,
// applies the update and sends the new weights back; workers wait for them. The server's link
// carries (p−1) gradients in and (p−1) weight copies out per iteration — the imbalance D-Sync's
// ring removes. A codec, when configured, compresses the gradient pushes.
#pragma once
#include <memory>
#include <vector>

#include "comm/comm_thread.h"   // CommThread
#include "compress/codec.h"     // Codec
#include "sched/algorithm.h"    // AlgorithmEntry
#include "sched/host_mirror.h"  // HostMirror: GPU buffers staged through host memory
#include "sched/scheduler.h"    // Scheduler

namespace dtrain {

struct PsSyncOptions {};  // no keys of its own

AlgorithmEntry ps_sync_algorithm();
class PsSyncScheduler final : public Scheduler {
 public:
  PsSyncScheduler(SchedulerContext ctx, const PsSyncOptions& options = {});
  std::string name() const override { return "ps_sync"; }
  std::string describe() const override;
  EpochStats run_epoch(Loader& loader, const EpochPart& part) override;

 private:
  bool compressing() const;  // a codec other than none
  // Server, on the comm thread: receive every worker's gradient and sum it into its own.
  void gather_gradients(double* compress_s);
  // Server, on the comm thread: send the updated weights back.
  void send_weights();
  // Worker, on the comm thread: push the gradient, receive the new weights.
  void push_and_pull(double* compress_s);
  Tensor trainable_parameters() const;

  std::unique_ptr<Codec> codec_;
  // Host views of the trainable gradients and weights (the tensors themselves on the CPU).
  HostMirror grads_, weights_;
  CommThread thread_;
  std::vector<char> encoded_;
  std::vector<std::vector<char>> inbox_;  // server: one encoded gradient per worker
};

}  // namespace dtrain
