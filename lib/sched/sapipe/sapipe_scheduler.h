// SAPipe (Chen et al., NeurIPS 2022, Algorithms 1–3) on Pipe-SGD's two-slot pipeline: only the
// first k layers — a prefix of the flat buffers, whose gradients backward produces last and the
// next forward needs first — train on the all-reduced gradient of iteration t − 2; the other
// layers are stepped with that of t − 1 just before the forward reaches them (a hook in
// Model::forward). Per iteration the trainable floats are all-reduced once, as in sync, in parts:
// the fresh segments as soon as backward has produced them, the stale prefix last.
//
// Iteration t:  wait for the prefix sum of t − 2, [compensate it (dc)], step the prefix;
//               [predict the prefix's next weights x̃ (wp1–3) into the model's prefix, the
//               master prefix kept apart];
//               forward 1..k; hook: wait for the fresh sum of t − 1, step the fresh layers;
//               forward k+1..m; backward, starting the fresh segments' all-reduces as they are
//               final and the prefix's last.
// k = 0 is sync (the hook is at the first layer); k = all is Pipe-SGD with K = 2.
// Every update goes through the Optimizer (any row of the table): one gradient is one optimizer
// step, begun by its first part to be applied; the prediction is the optimizer's next step with ĝ
// (WeightPrediction::predict_range). Clipping (optimizer.clip_grad_norm) scales each part of the
// all-reduced gradient by the whole gradient's norm, the fresh part's with the last stepped
// prefix's share (docs/algorithms.md, SAPipe).
//
// `stale_layers: auto` runs the first iterations as D-Sync while it times each layer's forward
// and backward and the all-reduce, then takes the least k that hides the communication
// (plan/stale_layers.h); rank 0 decides for all. Warm-up epochs are D-Sync too. The chooser
// uses the paper's C2, whose budget Σ_{i<m} b_i assumes each layer's gradient leaves as soon as
// its backward ends; with `segments: 1` the fresh layers leave together after layer k + 1's
// backward, so a k at C2's edge can stall the hook by up to the fresh layers' backward
// (`segments: N` narrows that). So `auto` checks its choice: the first pipelined iterations after
// it measure how long the next forward waits at the hook, and where that is more than a few per
// cent of the iteration, k is chosen anew from the profile with its all-reduce times scaled by
// what was measured (plan/stale_layers.h, grow_stale_layers), at most a few times.
#pragma once
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/gradient_allreducer.h"       // GradientAllreducer
#include "optim/weight_prediction.h"        // WeightPrediction: the stale layers' steps
#include "plan/stale_layers.h"              // LayerCost: auto's check
#include "sched/gradient_segments.h"        // GradientSegments
#include "sched/sapipe/sapipe_algorithm.h"  // SapipeOptions
#include "sched/scheduler.h"                // Scheduler

namespace dtrain {

class SapipeScheduler final : public Scheduler {
 public:
  SapipeScheduler(SchedulerContext ctx, const SapipeOptions& options);
  ~SapipeScheduler() override;
  std::string name() const override { return "sapipe"; }
  std::string describe() const override;
  // stale_layers: auto, once the profile has chosen k.
  std::vector<std::pair<std::string, std::string>> resolved_settings() const override;
  EpochStats run_epoch(Loader& loader, const EpochPart& part) override;
  // Applies both slots' gradients in iteration order; the model then holds the master weights.
  void flush() override;
  void save(SchedulerState& state) override;
  void load(const SchedulerState& state) override;

  // For tests and the log: the stale layers (−1 while `auto` is still profiling), the
  // parameterised layers that can be stale, and the prefix's last Δ (dc: x_{t−1} − x_{t−2} of the
  // last stale step; wp3 with dc_form diag: the last stale step's change; empty before the first;
  // wp3's outer form never writes its Δ out).
  int stale_layers() const { return k_; }
  int trainable_layers() const { return static_cast<int>(layers_.size()); }
  std::vector<float> last_delta() const;

 private:
  // The optimizer's weight prediction (checked at construction wherever a compensation uses it).
  WeightPrediction& predictor() const { return *ctx_.optimizer.prediction(); }
  struct Slot {
    Tensor gradients;                             // backward writes here; summed in place
    std::vector<std::future<void>> fresh, stale;  // all-reduces in flight
    Tensor own;  // the prefix of this rank's own gradient g_i, kept from before the sum (wp*)
    int64_t iteration = -1;      // whose gradient it holds
    float lr = 0;                // of that iteration: the fresh layers step with it, as sync
    bool fresh_pending = false;  // its fresh part is still to be applied
    bool stale_pending = false;  // its prefix is still to be applied
    // Clipping: the squared norm of its fresh part's sum, taken when that part stepped.
    double fresh_squared_norm = 0;
    bool stale_prepared = false;  // prepare_stale has run for its pending prefix
  };
  struct Profile;  // `auto`'s per-layer timings

  // Fixes k: the prefix [begin_, prefix_end_), the fresh segments and the hook.
  void set_stale_layers(int k);
  // One D-Sync iteration (warm-up, `auto`'s profile): all-reduce everything, step everything.
  void run_dsync(Slot& slot, const Batch& batch, float lr, EpochStats& stats);
  // One pipelined iteration.
  void run_pipelined(Slot& current, Slot& previous, const Batch& batch, float lr,
                     EpochStats& stats);
  // Waits for the slot's prefix sum, compensates it (dc) and steps the prefix with `lr`; with
  // `predict_with`, also writes the weights predicted with that ĝ into the model's prefix.
  void apply_stale(Slot& slot, float lr, EpochStats* stats, const Tensor* predict_with = nullptr);
  // apply_stale's first half, once per pending prefix: waits for the sum, begins the optimizer
  // step where the slot has no fresh part, clips.
  void prepare_stale(Slot& slot, EpochStats* stats);
  // wp3 with the outer DC (its default form): the stale step of `current`'s prefix and the
  // prediction from it, in two passes over the prefix — the step summing its gᵀΔ, then the
  // prediction with ĝ formed as it goes (WeightPrediction::step_range_dot, predict_range_sum).
  void step_and_predict_wp3(Slot& current, Slot& previous, float lr, EpochStats& stats);
  // Waits for the slot's fresh sum and steps the fresh layers with the slot's learning rate.
  void apply_fresh(Slot& slot, EpochStats* stats);
  // ĝ of the weight prediction (null: no prediction this iteration); wp3 computes it in place
  // in the prefix of `current`'s gradients. The caller writes x̃.
  const Tensor* prediction_gradient(Slot& current, Slot& previous, bool stepped);
  // Weight prediction keeps the master prefix apart (master_) while the model's prefix holds
  // x̃; the fresh layers' master is always the model's.
  const Tensor& master() const;
  void keep_master_apart();
  void master_into_model();
  // DC(g, Δ_) on the prefix of `g`: `diag` applies it and returns 1; `outer` returns the factor
  // 1 + λ·gᵀΔ for the caller to apply in the pass that follows.
  float compensate(const Tensor& g);
  // Clipping of the all-reduced gradient (optimizer.clip_grad_norm > 0) one part at a time:
  // scales `part` by the coefficient of the norm √(‖part‖² + other_squared_norm), which it
  // returns; ‖part‖² (before the scaling) goes to `squared_norm`.
  double clip(const Tensor& part, double other_squared_norm, double* squared_norm);
  void wait(std::vector<std::future<void>>& inflight, EpochStats* stats);
  Tensor prefix(const Tensor& flat) const;
  // `auto`: rank 0's choice from the profile, the same on every rank.
  void decide_stale_layers();
  // `auto`'s check of its choice (AutoCheck): after a window of pipelined iterations, a hook that
  // waited for the fresh sum makes k grow; rank 0 decides for every rank.
  void check_stale_layers();

  SapipeOptions options_;
  std::vector<LayerRange> layers_;  // the trainable parameterised layers, forward order
  int k_ = -1;
  int64_t begin_ = 0, prefix_end_ = 0, end_ = 0;  // trainable range, stale prefix's end
  std::optional<GradientSegments> fresh_segments_;
  std::vector<Slot> slots_;  // slot t mod 2 holds iteration t
  size_t segments_started_ = 0;
  // Compensation state, full-size buffers of which only the prefix is used.
  Tensor change_;  // dc: the last stale step's change, the next one's Δ
  bool has_previous_ = false;
  Tensor delta_, master_;
  bool master_apart_ = false;
  bool has_delta_ = false;
  EpochStats* hook_stats_ = nullptr;  // where the hook's wait and update are counted
  double hook_s_ = 0;                 // and how long they took, inside the forward
  int64_t iteration_ = 0;
  float last_lr_ = 0;
  // Clipping: the last stepped prefix's squared norm (the fresh layers' estimate of the prefix's
  // share) and its gradient's coefficient (which scales the own gradients of a prediction).
  double last_prefix_squared_norm_ = 0, last_clip_ = 1;
  std::unique_ptr<Profile> profile_;
  // `auto`'s check: the profile times the all-reduce alone, but pipelined it shares the cores with
  // the computation and may run slower, so that the fresh sum arrives after the hook needs it.
  // The first pipelined iterations after a choice measure the hook's wait; where it is more than
  // a small share of the iteration, the all-reduce times are scaled by what was measured and k
  // chosen anew (larger), at most kMaxAutoChecks times.
  struct AutoCheck {
    std::vector<LayerCost> layers;  // the profile's, comm_s scaled by the checks so far
    double fixed_s = 0;             // a small all-reduce's cost
    int iterations = 0;             // counted in the current window
    double wait_s = 0, wall_s = 0;  // the hook's waits and the iterations' time in it
    int checks = 0;                 // windows judged
    bool active = false;
  };
  AutoCheck check_;
  double hook_wait_s_ = 0;  // the hook's wait for the fresh sum, this iteration
  // Declared last: its thread is joined before the slots are freed.
  std::unique_ptr<GradientAllreducer> allreducer_;  // null on one rank
};

}  // namespace dtrain
