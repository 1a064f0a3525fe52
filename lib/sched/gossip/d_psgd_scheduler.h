// D-PSGD (Lian et al., NeurIPS 2017; AD-PSGD's synchronous baseline): every iteration each rank
// sends its model to its neighbours while it computes its gradient at that model, then steps
//   x_i ← Σ_j W_ij x_j − γ g_i(x_i),   W_ij = 1/(degree + 1) for i's neighbours and i itself
// (topology.h). `complete` mixes with every rank: the all-reduce average. Each rank steps with
// its own batch's mean gradient and keeps its own momentum; models differ between ranks, so
// evaluation uses their mean and each rank continues from its own.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/comm_thread.h"               // CommThread: the exchange overlaps the gradient
#include "comm/gradient_allreducer.h"       // GradientAllreducer: the complete topology
#include "sched/gossip/d_psgd_algorithm.h"  // DPsgdOptions
#include "sched/gossip/model_average.h"     // ModelAverager: evaluation
#include "sched/gossip/topology.h"          // Topology
#include "sched/host_mirror.h"              // HostMirror: GPU models staged through host memory
#include "sched/scheduler.h"                // Scheduler

namespace dtrain {

class DPsgdScheduler final : public Scheduler {
 public:
  DPsgdScheduler(SchedulerContext ctx, const DPsgdOptions& options);
  ~DPsgdScheduler() override;
  std::string name() const override { return "d_psgd"; }
  std::string describe() const override;
  EpochStats run_epoch(Loader& loader, const EpochPart& part) override;
  // The mean of the ranks' models; each rank's own is restored afterwards.
  EvalResult evaluate(Loader& test) override;
  NamedTensors weights() override {  // as evaluated
    return on_mean_model(averager_.get(), [this] { return Scheduler::weights(); });
  }

 protected:
  float gradient_scale(int64_t rows) const override { return 1.0f / static_cast<float>(rows); }

 private:
  // On the comm thread: the neighbours' models into inbox_, this rank's to each of them.
  void exchange();
  // Starts this iteration's communication of the model (nothing with one rank).
  void start_mixing();
  // Waits for it and replaces the model by the weighted mean (timed as wait and update).
  void finish_mixing(EpochStats& stats);

  Topology topology_;
  std::vector<int> neighbours_;
  Tensor weights_;                         // the trainable range of the parameters
  std::unique_ptr<HostMirror> host_;       // ring, exponential: weights_ as the exchange sees it
  std::vector<std::vector<float>> inbox_;  // one model per neighbour
  Tensor mixed_;                           // complete: the snapshot being summed
  std::unique_ptr<GradientAllreducer> mixer_;  // complete
  std::unique_ptr<ModelAverager> averager_;    // evaluation (more than one rank)
  std::future<void> pending_;
  CommThread thread_;  // last: joined first, while what its requests use still exists
};

}  // namespace dtrain
