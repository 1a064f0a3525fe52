// Scheduler: owns the training loop of one distributed algorithm (docs/architecture.md). It sees
// the rest of dtrain only through the Model, the optimizer, the LR schedule and the Comm, reports
// what it did per epoch in the phases of timing.csv, and owns what is evaluated and saved
// (decision 9): evaluate(), save() and load() are its hooks.
#pragma once
#include <cstdint>
#include <functional>  // per-iteration progress callback
#include <memory>      // shared_ptr: model.init_from's tensors
#include <string>
#include <utility>  // std::pair: named buffers and counters
#include <vector>

#include "comm/comm.h"                 // Comm
#include "comm/gradient_allreducer.h"  // GradientPlacement
#include "comm/stop_vote.h"            // StopVote: where a signal stops the epoch
#include "core/phase.h"                // Phase, PhaseTimes, PhaseTimer
#include "data/loader.h"               // Loader: this rank's batches
#include "nn/model.h"                  // Model
#include "nn/safetensors.h"            // NamedTensors: weights()
#include "optim/decay.h"               // DecayRange: a model part's decoupled decay
#include "optim/lr_schedule.h"         // LrSchedule
#include "optim/optimizer.h"           // Optimizer
#include "optim/optimizer_table.h"     // OptimizerChoice: a model part's optimizer
#include "sched/scheduler_state.h"     // SchedulerState: save() and load()

namespace dtrain {

// One rank's account of one epoch: timing.csv's columns plus the running training loss.
struct EpochStats {
  int64_t iterations = 0;
  double wall_s = 0;
  PhaseTimes phases;                 // seconds per phase (core/phase.h)
  double loss_sum = 0, correct = 0;  // over this rank's training samples of the epoch
  int64_t samples = 0;
};

struct IterationReport {
  int epoch = 0;
  int64_t iteration = 0;  // within the epoch, 1-based
  double loss = 0;        // mean loss of this iteration's local batch
  int64_t samples = 0;    // global samples processed in this iteration
};

// The iterations of one epoch that one run_epoch call trains: from `first` (0-based; the loader
// is positioned there) for at most `count` more (0: to the epoch's end). The trainer splits an
// epoch where it checkpoints; an epoch it does not interrupt is one part.
struct EpochPart {
  int epoch = 0;
  int64_t first = 0;
  int64_t count = 0;
  // Whether iteration `i` (0-based within the epoch) may still run in this part.
  bool includes(int64_t i) const { return count <= 0 || i < first + count; }
};

// Loss and accuracy over a test set (all ranks' samples).
struct EvalResult {
  double loss = 0, acc = 0;
};

// The summed loss, correct predictions and samples of `model` (in evaluation mode) over this
// rank's batches of `test`, from its start; the model's training mode is kept.
// With `lockstep` (a model whose forward communicates: weights sharded over the ranks), every
// rank of it runs as many forwards as the rank with most: one whose part has ended runs its last
// part again, uncounted.
LossStats test_sums(Model& model, Loader& test, Comm* lockstep = nullptr);
// Rows [first, first + count) of a batch tensor ([rows, ...]): a view, no copy.
Tensor rows_of(const Tensor& t, int64_t first, int64_t count);

// Decoupled weight decay per parameter tensor of `slots` (a model's or a stage's): tensors of two
// or more dimensions decay, biases, norms' weights and other 1-D tensors do not (nanoGPT's
// configure_optimizers).
std::vector<DecayRange> decay_ranges(const std::vector<WeightSlot>& slots);
// The chosen optimizer over the flat buffers whose tensors `slots` describe (decay by
// decay_ranges), the prefix [0, trainable_offset) left alone.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerChoice& optimizer, Backend& backend,
                                          const Tensor& parameters, const Tensor& gradients,
                                          const std::vector<WeightSlot>& slots,
                                          int64_t trainable_offset = 0);

// What a model-parallel algorithm (pipedream) builds its own part of the model from: the whole
// model (SchedulerContext::model) only describes the run there.
struct ModelSource {
  YAML::Node spec;            // the checked `model:` section
  ModelInput input;           // the dataset's sample shape and classes
  uint64_t seed = 0;          // initialisation
  OptimizerChoice optimizer;  // for an optimizer of the part
  int64_t batch_size = 0;     // dataset.batch_size: the global minibatch
  int64_t train_samples = 0, test_samples = 0;
  int frozen_layers = 0;  // optimizer.freeze_layers
  // model.init_from's tensors (the whole model's, checked): the part starts from them instead
  // of the initialisation. Null: initialised from `seed`.
  std::shared_ptr<const NamedTensors> weights{};
  // train.accumulation_steps: micro-batches per optimizer step (pipedream refuses more than 1:
  // its flush schedules' algorithm.microbatches are the accumulation).
  int accumulation_steps = 1;
};

struct SchedulerContext {
  Model& model;
  // A row of the optimizer table; an algorithm that needs a capability (SAPipe's weight
  // prediction) asks the optimizer for it.
  Optimizer& optimizer;
  const LrSchedule& schedule;
  Comm& comm;
  int64_t iterations_per_epoch = 1;
  std::function<void(const IterationReport&)> on_iteration;  // may be empty
  std::string compression = "none";                          // codec inside the gradient all-reduce
  // Straggler emulation (cluster.stragglers): this rank's compute takes `compute_slowdown`
  // times as long as it really does.
  double compute_slowdown = 1.0;
  // How gradients on a GPU travel between ranks (cluster.comm): auto | nccl | mpi.
  std::string gpu_comm = "auto";
  ModelSource source{};
  // The ranks' agreement to stop at an iteration boundary (a signal); null: never asked.
  StopVote* stop = nullptr;
  // optimizer.clip_grad_norm: the whole gradient's L2 norm is clipped to this before the step
  // (0: off).
  double clip_grad_norm = 0;
  // train.accumulation_steps: compute_gradients splits each local batch into this many
  // micro-batches and sums their gradients before the step's one communication (≥ 1).
  int accumulation_steps = 1;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerContext ctx) : ctx_(std::move(ctx)) {}
  virtual ~Scheduler() = default;
  virtual std::string name() const = 0;
  // One line for the start-up log: the algorithm and how it communicates.
  virtual std::string describe() const { return name(); }
  // Trains `part` of an epoch on the batches of `loader` (positioned at its first iteration by
  // seek()). Stops early at the epoch's end.
  virtual EpochStats run_epoch(Loader& loader, const EpochPart& part) = 0;
  // A whole epoch from its start, or its first `max_iterations` (> 0) iterations.
  EpochStats run_epoch(Loader& loader, int epoch, int64_t max_iterations) {
    return run_epoch(loader, EpochPart{epoch, 0, max_iterations});
  }
  // Iterations of an epoch in the units of EpochPart, for a loader of `loader_batches` batches:
  // one per batch (data parallel); the epoch's updates over all ranks where each rank updates on
  // its own batches (gossip); minibatches or steps through the pipeline (pipedream).
  virtual int64_t epoch_iterations(int64_t loader_batches) const { return loader_batches; }
  // How the trainer counts those iterations where each rank updates on its own batches and the
  // ranks' updates together make them (gossip). own_share: of a part of `count` iterations
  // (0: to the epoch's end), the ones this rank runs — all of them by default.
  // iterations_advanced: what a part advanced the run by, from the iterations this rank `done`
  // of it — `done` by default; the ranks' sum where they share (a collective: every rank calls).
  virtual int64_t own_share(int64_t count) const { return count; }
  virtual int64_t iterations_advanced(int64_t done) { return done; }
  // Starts `epoch` of `loader` at iteration `first` of it (a resumed run).
  virtual void seek(Loader& loader, int epoch, int64_t first);
  // Leaves the parameters in the state to evaluate or save (pipelined algorithms apply what is
  // still in flight). Called before every evaluation and at the end.
  virtual void flush() {}
  // One line about the epoch just trained for the log (rank 0's), or empty: what the algorithm
  // decided at run time (HPSGD: how often it synchronised).
  virtual std::string epoch_summary() const { return ""; }
  // What this algorithm's `auto` keys settled on, as (key path, value) pairs a user can paste
  // back (--set KEY=VALUE) to repeat the run: empty where no key was left to auto, or while it
  // is not decided yet (SAPipe decides after its profile).
  virtual std::vector<std::pair<std::string, std::string>> resolved_settings() const { return {}; }
  // Iterations rank 0 reports to the progress line per epoch of `loader_batches` of its loader.
  virtual int64_t progress_iterations(int64_t loader_batches) const { return loader_batches; }
  // Result files of the algorithm's own beside timing.csv (pipedream: pipeline.csv), as
  // (file name, content); the content is complete on rank 0. A collective: every rank calls it
  // once when training ends.
  virtual std::vector<std::pair<std::string, std::string>> own_results() { return {}; }
  // Loss and accuracy of the model this algorithm stands for on `test` (a collective: every
  // rank calls it). Default: flush, then every rank evaluates its shard and the sums are
  // all-reduced.
  virtual EvalResult evaluate(Loader& test);
  // The weights of the model evaluate() evaluates, by name, complete on rank 0 and empty on the
  // other ranks: what a run saves as model.safetensors (a collective: every rank calls it).
  // Default: flush, then rank 0's model (the ranks hold the same one).
  virtual NamedTensors weights();
  // Receives the tensors of model.safetensors, to read one at a time (TensorSource::fill).
  using WeightWriter = std::function<void(const std::vector<TensorSource>& tensors)>;
  // The same weights streamed to `write` (a collective): rank 0 calls it to write the file;
  // where reading a tensor takes the ranks' communication (weights sharded over the ranks),
  // every rank calls it and reads every tensor in order. Default: weights() on rank 0.
  virtual void write_weights(const WeightWriter& write);
  // The flat parameters and buffers of the scheduler's model as TensorSources read in place
  // (host) or through a copy of one tensor (device): rank 0's model, no copy of the weights.
  std::vector<TensorSource> model_weight_sources();
  // The complete training state: parameters, BatchNorm statistics, momentum, the dropout
  // counter, and what the algorithm keeps of its own (overrides add theirs after the base's).
  // Waits for communication in flight but changes nothing: training continues as if not saved.
  virtual void save(SchedulerState& state);
  // Restores what save() wrote, so that training continues exactly as from that point.
  virtual void load(const SchedulerState& state);

 protected:
  // Learning rate at iteration `i` (0-based) of `epoch`; the iteration over the run, for the
  // schedules counted in iterations, is epoch · iterations_per_epoch + i.
  float lr_at(int epoch, int64_t i) const {
    return static_cast<float>(
        ctx_.schedule.lr_at(epoch + static_cast<double>(i) / ctx_.iterations_per_epoch,
                            epoch * ctx_.iterations_per_epoch + i));
  }
  // The factor on the summed loss of a local batch of `rows`: 1 / (rows · ranks) makes the sum
  // of the ranks' gradients the global-batch mean (data parallel); an algorithm whose ranks
  // step on their own gradient (local SGD, gossip) takes the local mean, 1 / rows.
  virtual float gradient_scale(int64_t rows) const {
    return 1.0f / static_cast<float>(rows * ctx_.comm.size());
  }
  // Stretches compute that took `seconds` to compute_slowdown × seconds; returns the added time.
  double emulate_straggler(double seconds) const;
  // The local half of a step: forward and backward of this rank's batch with the loss scaled by
  // gradient_scale of the whole batch (straggler emulation included), timed into `stats`, into
  // the model's gradients(). With train.accumulation_steps N > 1 the batch runs as N
  // micro-batches one after another and gradients() ends up holding their sum (the whole
  // batch's gradient to float rounding); the loss statistics of finish_iteration are the whole
  // batch's. `on_ready(offset)`: gradients[offset, P) are final (Model::backward) — called only
  // during the last micro-batch, once the sum of that range is complete, so that whatever it
  // starts (a segment's all-reduce) runs once per step.
  void compute_gradients(const Batch& batch, EpochStats& stats,
                         const std::function<void(int64_t)>& on_ready = {});
  // Clips `gradients` (a flat gradient's trainable part) to optimizer.clip_grad_norm when that
  // is on; the caller chooses which gradient (all-reduced or local: its algorithm's rule).
  void clip_gradients(const Tensor& gradients) const;
  // The part of a flat buffer the optimizer updates: frozen layers are not communicated.
  Tensor trainable_part(const Tensor& flat) const;
  // How save() and load() keep the model's weights: whole ("model.parameters") by default.
  virtual void save_parameters(SchedulerState& state);
  virtual void load_parameters(const SchedulerState& state);
  Tensor trainable_gradients() const { return trainable_part(ctx_.model.gradients()); }
  // Where the gradient all-reduce finds the buffers (host or GPU) and how GPU ones travel.
  GradientPlacement gradient_placement() const { return {&ctx_.model.backend(), ctx_.gpu_comm}; }
  // At the top of every iteration of an algorithm whose ranks do the same iterations: true
  // when the ranks agreed to stop here (the part then ends early; the trainer checkpoints).
  bool stop_requested() { return ctx_.stop && ctx_.stop->stop_here(); }
  // Throws when `gradients` hold a NaN or an inf. Pipelined algorithms apply a gradient
  // iterations after computing it: checked as it is computed, a divergence ends the run in the
  // iteration it happens, not when the weights it reaches give a NaN loss. `iteration`: over
  // the run, 1-based.
  void check_gradients(const Tensor& gradients, int64_t iteration) const;
  // Accounts the step's loss (throws on divergence) and reports progress.
  void finish_iteration(int epoch, int64_t i, int64_t rows, EpochStats& stats);
  // Evaluates the model's current parameters on `test` (every rank its shard; a collective).
  EvalResult evaluate_model(Loader& test, Comm* lockstep = nullptr);

  SchedulerContext ctx_;

 private:
  // Micro-batches 2..N of compute_gradients (the first wrote into accumulated_ directly).
  void accumulate_backward(float scale, bool last, const std::function<void(int64_t)>& on_ready);

  // The running sum of a step's micro-batch gradients (train.accumulation_steps > 1), laid out
  // as gradients(); allocated at the first accumulated step.
  Tensor accumulated_;
};

}  // namespace dtrain
