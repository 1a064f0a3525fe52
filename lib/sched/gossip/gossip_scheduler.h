// AD-PSGD (Lian et al., ICML 2018, Algorithm 1; `gossip`): every rank trains its own model with
// its own data stream and, each update, averages it with one random neighbour:
// x_i, x_j ← (x_i + x_j)/2, atomically for the pair, while it computes its next gradient. No
// global barrier within an epoch.
//
// Deadlock-free by construction (§3.3.1): the topology is bipartite (topology.h); odd ranks are
// active and start exchanges, even ranks are passive and only answer, on a server thread, one
// request at a time, first come first served. The compute thread is the only writer of its
// parameters: an exchange works on a copy of the model (the model plus the differences not yet
// applied) and hands back the difference (theirs − mine)/2, which the compute thread adds at
// its next update. A GPU model is read through a host copy the compute thread refreshes at
// each update; a CPU model is read in place (both under one lock with the model's writes). The
// pair's two differences cancel, so the sum of the models is exact whatever the local steps do
// meanwhile.
//
// An epoch is N/M updates counted over all ranks together (a faster rank does more): every rank
// tells rank 0 its count after each update (small control messages, outside any emulated link),
// rank 0's server announces the end, the active ranks tell their neighbours they are done, and
// the passive servers stop once every active neighbour has. Evaluation uses the ranks' mean
// model; each rank then continues from its own.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "comm/comm_thread.h"               // CommThread: the exchanges and the server
#include "sched/gossip/gossip_algorithm.h"  // GossipOptions
#include "sched/gossip/model_average.h"     // ModelAverager: evaluation
#include "sched/gossip/topology.h"          // Topology
#include "sched/host_mirror.h"              // HostMirror: a GPU model's host copy
#include "sched/scheduler.h"                // Scheduler

namespace dtrain {

class GossipScheduler final : public Scheduler {
 public:
  GossipScheduler(SchedulerContext ctx, const GossipOptions& options);
  ~GossipScheduler() override;
  std::string name() const override { return "gossip"; }
  std::string describe() const override;
  EpochStats run_epoch(Loader& loader, const EpochPart& part) override;
  EvalResult evaluate(Loader& test) override;
  NamedTensors weights() override {  // as evaluated
    return on_mean_model(averager_.get(), [this] { return Scheduler::weights(); });
  }
  // An epoch's iterations are its updates over all ranks (N/M); a part's count is each
  // rank's own.
  int64_t epoch_iterations(int64_t) const override { return ctx_.iterations_per_epoch; }
  // Each rank runs ⌈1/ranks⌉ of a part; what it advanced is the ranks' updates together.
  int64_t own_share(int64_t count) const override;
  int64_t iterations_advanced(int64_t done) override;
  // Rank 0 reports its own updates: 1/ranks of an epoch's.
  int64_t progress_iterations(int64_t loader_batches) const override {
    return loader_batches / ctx_.comm.size();
  }
  // Each rank continues its own pass over the data where it was.
  void seek(Loader& loader, int epoch, int64_t first) override;
  void save(SchedulerState& state) override;
  void load(const SchedulerState& state) override;

  // Counters of this rank's exchanges (tests: every request is served).
  int64_t exchanges_started() const { return started_; }
  int64_t exchanges_served() const { return served_; }

 protected:
  float gradient_scale(int64_t rows) const override { return 1.0f / static_cast<float>(rows); }

 private:
  bool active() const { return ctx_.comm.rank() % 2 == 1; }
  // Active, on the exchange thread: one averaging with a random neighbour.
  void exchange();
  // Passive, on the server thread: answers requests until every active neighbour is done with
  // this epoch; rank 0 also tallies the updates and announces the epoch's end.
  void serve(int epoch);
  void answer(int peer);
  // Rank 0's server: a count message arrived.
  void tally(int peer, int epoch);
  // mirror_ ← this rank's model as an exchange sees it (the model plus pending_).
  void snapshot();
  // pending_ += (theirs_ − mirror_) / 2.
  void add_difference();
  // Compute thread, under the lock: the model += pending_, then one optimizer step.
  void update(float lr, EpochStats& stats);
  // Under the lock: the model += pending_; pending_ ← 0.
  void apply_pending();
  // The steps of run_epoch around its loop: the epoch's control messages (EpochTraffic) are
  // opened, a count is reported after each update, and the epoch is closed (or abandoned on
  // an error) for every rank together.
  struct EpochTraffic;
  void open_epoch(EpochTraffic& traffic, int epoch);
  // The next batch; a fast rank of several starts another pass. False: this rank is out.
  bool next_batch(Loader& loader, int epoch, Batch& batch, EpochStats& stats);
  void report_count(EpochTraffic& traffic, int epoch, int64_t updates);
  void abandon_epoch(EpochTraffic& traffic);
  void close_epoch(EpochTraffic& traffic, int epoch, int64_t updates, EpochStats& stats);

  Topology topology_;
  std::vector<int> neighbours_;
  int active_neighbours_ = 0;
  std::unique_ptr<Comm> models_;      // the exchanges' own communicator (the link is emulated)
  std::unique_ptr<Comm> control_;     // headers, counts, the end of an epoch (not paced)
  Tensor weights_;                    // the trainable parameters
  std::unique_ptr<HostMirror> host_;  // weights_ as the exchanges read them
  std::vector<float> mirror_, theirs_;
  Tensor pending_;            // host: differences not yet added to the model
  Tensor pending_on_device_;  // GPU: pending_ uploaded
  std::mutex model_mutex_;    // the model's writes (compute) against its copies (exchanges)
  std::mt19937_64 rng_;
  int64_t target_ = 0;    // updates of this part of the epoch, over all ranks
  int passes_ = 0;        // this rank's extra passes over the data in this epoch
  int64_t consumed_ = 0;  // batches of the current pass
  std::atomic<bool> stop_{false};
  std::atomic<bool> abandon_{false};  // the epoch will not end normally: the server leaves
  std::vector<int64_t> counts_;       // rank 0: each rank's updates this epoch
  int finals_ = 0;
  bool announced_ = false;
  std::atomic<int64_t> started_{0}, served_{0};
  double answer_s_ = 0;  // passive: seconds answering this epoch (server thread; read after it)
  std::unique_ptr<ModelAverager> averager_;
  CommThread exchanges_{"gossip"};
  CommThread server_{"gossip server"};  // last: joined first
};

}  // namespace dtrain
