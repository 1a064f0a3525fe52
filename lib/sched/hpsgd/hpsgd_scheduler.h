// HPSGD (Zhou et al., "Hierarchical Parallel SGD", Algorithms 2 and 3): the compute thread never
// waits for a synchronisation. While one is in flight it trains a replica r of the global model
// w and accumulates its gradients in a; when the previous one has finished (on every rank), w
// takes its all-reduced sum b (w ← w − μ·b, with the gradients scaled to the global-batch
// mean), a is handed to the comm thread for the next all-reduce, and training continues from
// r ← w. Every gradient computed on every rank is applied to w exactly once (the paper's
// Eq. 1), so after flush() w = w₀ − μ · Σ of every rank's mean gradients.
//
// With momentum or AdamW the merge of a round of k iterations is k steps of the optimizer over
// w, each with the round's mean gradient b / k, on a state (momentum; AdamW's m, v and step
// count) that belongs to w: it is identical on every rank and takes each round's b once.
// The replica steps with the run's optimizer, whose state is a scratch copy of w's, reset to it
// at every r ← w: what the replica's steps put into it is dropped with r, so no gradient reaches
// w or w's state twice. Plain SGD (no momentum) keeps its one fused pass per iteration.
//
// When to synchronise is decided together, so that every rank issues the same all-reduces in the
// same order: `sync_period: N` every N iterations (waiting if the previous round is late);
// `auto` as soon as the previous round has finished on every rank. For `auto`, the comm thread
// follows each round's all-reduce with a small agreement: each rank proposes the first
// iteration boundary its compute thread has not yet passed, and the next round starts at the
// largest proposal. A compute thread only waits for the agreement when it reaches its own
// proposal before the agreement is done — there is no barrier per iteration. When the proposals
// show a rank more than an iteration ahead, the ranks meet once at the next round's start (the
// paper's waiting phase), so that a faster rank does not drift ahead for a whole epoch.
#pragma once
#include <future>
#include <memory>
#include <mutex>
#include <optional>  // the linear step's decay

#include "comm/gradient_allreducer.h"     // GradientAllreducer
#include "optim/optimizer.h"              // Optimizer: the merge's and the replica's steps
#include "sched/hpsgd/hpsgd_algorithm.h"  // HpsgdOptions
#include "sched/scheduler.h"              // Scheduler

namespace dtrain {

class HpsgdScheduler final : public Scheduler {
 public:
  HpsgdScheduler(SchedulerContext ctx, const HpsgdOptions& options);
  ~HpsgdScheduler() override;
  std::string name() const override { return "hpsgd"; }
  std::string describe() const override;
  EpochStats run_epoch(Loader& loader, const EpochPart& part) override;
  // Merges the round in flight, then all-reduces and merges what was accumulated since it, and
  // leaves the model's parameters = w (so training continues from a fresh replica).
  void flush() override;
  std::string epoch_summary() const override;
  // sync_period: auto starts a round whenever the previous one has finished everywhere, so no
  // fixed period repeats it exactly: the run's mean iterations per round is the closest.
  std::vector<std::pair<std::string, std::string>> resolved_settings() const override;
  // w, a, b and the counters; the round in flight is waited for and saved as the sum it is.
  void save(SchedulerState& state) override;
  void load(const SchedulerState& state) override;

  int64_t rounds() const { return rounds_total_; }  // all-reduces started (flush's included)
  // `auto`'s agreements in which the ranks proposed different boundaries (they had drifted).
  int64_t uneven_agreements() const { return uneven_agreements_; }
  const Tensor& global_model() const { return w_; }  // w (model layout; undefined on one rank)

 private:
  // Whether the round starts at boundary `t` (after iteration t's gradient, 0-based over the
  // run); the same answer on every rank. `stats` gets the agreement's wait.
  bool round_due(int64_t t, EpochStats& stats);
  // w ← w − μ·b once the round in flight has finished (waiting for it into `phases`); with
  // momentum or AdamW k steps of merge_ over w with b / k (k: the round's iterations).
  void merge_round(float lr, PhaseTimes& phases);
  // Lines 11–14 and Algorithm 3: merge the finished round, hand a (with this iteration's
  // gradient) to the comm thread, r ← w.
  void start_round(int64_t t, float lr, PhaseTimes& phases);
  // Lines 4–10: a += ĝ and r ← r − μĝ, weight decay joining ĝ at the replica (SGD). The loss
  // was scaled by 1 / (rows · ranks), so that the ranks' sum is the global mean: a holds
  // ĝ / ranks. ĝ is first clipped to optimizer.clip_grad_norm by its local norm. `step`: false
  // at a round's start, where r ← w follows (the optimizer path then skips r's step).
  void train_replica(float lr, PhaseTimes& phases, bool step = true);
  // r ← w, and the replica optimizer's state ← merge_'s (the optimizer path).
  void restart_replica();
  // Waits for the round and the agreement in flight (their results are kept).
  void complete_inflight(PhaseTimes& phases);

  int period_;  // 0: auto
  Tensor w_;    // the global model (model layout; identical on every rank)
  Tensor a_;    // gradients accumulated since the last round started
  Tensor b_;    // the round in flight: a's sum over the ranks, in place
  // λ where the run's optimizer steps linearly (plain SGD: Optimizer::linear_step_decay): the
  // replica then keeps Σĝ in its step's pass and w takes one step of the round's sum.
  std::optional<float> linear_decay_;
  // w's optimizer (its state is the global model's), stepping w with b; the replica steps with
  // ctx_.optimizer. Null on one rank.
  std::unique_ptr<Optimizer> merge_;
  int64_t accumulated_ = 0;   // gradients in a (the paper's counter + 1)
  int64_t sum_count_ = 0;     // iterations whose gradients b sums (the round in flight)
  bool sum_pending_ = false;  // b holds a round not yet merged into w
  std::future<void> round_;   // b's all-reduce
  int64_t iteration_ = 0;     // boundaries passed over the run
  int64_t next_round_ = 0;    // auto: the agreed boundary of the next round; -1: undecided
  float last_lr_ = 0;

  // auto's agreement, shared with the comm thread.
  std::mutex agreement_mutex_;
  bool round_done_ = false;  // the comm thread has finished b's all-reduce
  int64_t unpassed_ = 0;     // the first boundary the compute thread has not passed
  int64_t agreed_ = -1;      // the agreement's result, read after agreement_.get()
  int64_t agreed_lead_ = 0;  // how far the first rank was ahead of the last, in iterations
  bool meet_ = false;        // the ranks meet at the next round's start
  std::future<void> agreement_;

  // For the log: rounds and iterations of the epoch, and the all-reduce time per round.
  int64_t uneven_agreements_ = 0;
  int64_t rounds_total_ = 0, epoch_rounds_ = 0, epoch_meetings_ = 0, epoch_iterations_ = 0;
  double epoch_comm_s_ = 0, epoch_compute_s_ = 0;
  // comm_s and compress_s of a round that ended in flush(), reported with the next epoch.
  double carried_comm_s_ = 0, carried_compress_s_ = 0;

  // Declared last: its thread is joined (finishing a round writing into b, an agreement
  // touching the members above) before they go.
  std::unique_ptr<GradientAllreducer> allreducer_;  // null on one rank
};

}  // namespace dtrain
