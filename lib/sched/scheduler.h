// Scheduler: owns the training loop of one distributed algorithm (DESIGN.md §2). It sees the
// rest of dtrain only through the Model, the optimizer, the LR schedule and the Comm, and
// reports what it did per epoch in the units of timing.csv.
#pragma once
#include <cstdint>
#include <functional>  // per-iteration progress callback
#include <string>

#include "comm/comm.h"                 // Comm
#include "comm/gradient_allreducer.h"  // GradientPlacement
#include "data/loader.h"               // Loader: this rank's batches
#include "nn/model.h"                  // Model
#include "optim/lr_schedule.h"         // LrSchedule
#include "optim/sgd.h"                 // Sgd

namespace dtrain {

// One rank's account of one epoch (timing.csv columns plus the running training loss).
struct EpochStats {
  int64_t iterations = 0;
  double wall_s = 0, data_s = 0, forward_s = 0, backward_s = 0, update_s = 0;
  double compress_s = 0, comm_s = 0, wait_s = 0;
  double loss_sum = 0, correct = 0;  // over this rank's training samples of the epoch
  int64_t samples = 0;
};

struct IterationReport {
  int epoch = 0;
  int64_t iteration = 0;  // within the epoch, 1-based
  double loss = 0;        // mean loss of this iteration's local batch
  int64_t samples = 0;    // global samples processed in this iteration
};

// Pipe-SGD's knobs (algorithm.K, .warmup_epochs, .segments).
struct PipelineOptions {
  int K = 2;              // iteration dependency: the update at t uses the gradient of t − K
  int warmup_epochs = 0;  // epochs of D-Sync before pipelining starts
  int segments = 1;       // gradient segments all-reduced as backward produces them
};

struct SchedulerContext {
  Model& model;
  Sgd& optimizer;
  const LrSchedule& schedule;
  Comm& comm;
  int64_t iterations_per_epoch = 1;
  std::function<void(const IterationReport&)> on_iteration;  // may be empty
  std::string compression = "none";                          // codec inside the gradient all-reduce
  // Straggler emulation (cluster.stragglers): this rank's compute takes `compute_slowdown`
  // times as long as it really does.
  double compute_slowdown = 1.0;
  PipelineOptions pipeline = {};
  // How gradients on a GPU travel between ranks (cluster.comm): auto | nccl | mpi.
  std::string gpu_comm = "auto";
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerContext ctx) : ctx_(std::move(ctx)) {}
  virtual ~Scheduler() = default;
  virtual std::string name() const = 0;
  // One line for the start-up log: the algorithm and how it communicates.
  virtual std::string describe() const { return name(); }
  // Trains on the batches of `loader` (whose epoch has been started) until it ends or
  // `max_iterations` (> 0) iterations were done.
  virtual EpochStats run_epoch(Loader& loader, int epoch, int64_t max_iterations) = 0;
  // Leaves the parameters in the state to evaluate or save (pipelined algorithms apply what is
  // still in flight). Called before every evaluation and at the end.
  virtual void flush() {}

 protected:
  // Learning rate at iteration `i` (0-based) of `epoch`.
  float lr_at(int epoch, int64_t i) const {
    return static_cast<float>(
        ctx_.schedule.lr_at(epoch + static_cast<double>(i) / ctx_.iterations_per_epoch));
  }
  // Stretches compute that took `seconds` to compute_slowdown × seconds; returns the added time.
  double emulate_straggler(double seconds) const;
  // The local half of a data-parallel step: forward and backward of this rank's batch with the
  // loss scaled to the global-batch mean (straggler emulation included), timed into `stats`.
  // `on_ready(offset)`: gradients[offset, P) are final (Model::backward).
  void compute_gradients(const Batch& batch, EpochStats& stats,
                         const std::function<void(int64_t)>& on_ready = {});
  // The part of the flat gradient the optimizer updates: frozen layers are not communicated.
  Tensor trainable_gradients() const;
  // Where the gradient all-reduce finds the buffers (host or GPU) and how GPU ones travel.
  GradientPlacement gradient_placement() const { return {&ctx_.model.backend(), ctx_.gpu_comm}; }
  // Accounts the step's loss (throws on divergence) and reports progress.
  void finish_iteration(int epoch, int64_t i, int64_t rows, EpochStats& stats);

  SchedulerContext ctx_;
};

}  // namespace dtrain
