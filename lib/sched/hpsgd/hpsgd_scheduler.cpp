#include "sched/hpsgd/hpsgd_scheduler.h"

#include <fmt/format.h>  // fmt::format: the log lines

#include <algorithm>  // max, minmax_element
#include <bit>        // bit_cast: the learning rate as a counter, exactly
#include <cmath>      // ceil, llround, sqrt
#include <utility>    // swap
#include <vector>

#include "core/error.h"
#include "optim/clip.h"  // clip_coefficient: the replica's local gradient
#include "optim/sgd.h"   // sgd_step_accumulate: the replica's plain steps

namespace dtrain {

namespace {

// The Local SGD period the log compares HPSGD with: the paper's γ (§4.1).
constexpr double kPaperGamma = 8;
// With `auto`: how many iterations one rank may be ahead of another when a round ends before
// the ranks meet at the next round's start (with `sync_period: N` a rank ahead waits for the
// late round instead, so the lead stays within a period).
constexpr int64_t kMaxLead = 1;

Tensor model_sized_zeros(Model& model) {
  return model.backend().zeros({model.num_parameters()});
}

}  // namespace

HpsgdScheduler::HpsgdScheduler(SchedulerContext ctx, const HpsgdOptions& options)
    : Scheduler(std::move(ctx)),
      period_(options.sync_period.is("auto") ? 0 : options.sync_period.value),
      linear_decay_(ctx_.optimizer.linear_step_decay()) {
  DTRAIN_INPUT_CHECK(options.sync_period.is("auto") || period_ >= 1)
      << "algorithm.sync_period: must be auto or >= 1, got " << period_;
  if (ctx_.comm.size() == 1) return;  // one rank: the optimizer's steps, nothing to synchronise
  Model& model = ctx_.model;
  w_ = model_sized_zeros(model);
  a_ = model_sized_zeros(model);
  b_ = model_sized_zeros(model);
  model.backend().copy(w_, model.parameters());
  // w's own optimizer, stepping w with the rounds' sums b: the run's optimizer's kind and
  // options, with a state of its own. A decay added to the gradient is part of ĝ (added at the
  // replica), so the merge's has none; a decoupled decay applies to w at the merge.
  merge_ = ctx_.optimizer.fresh(w_, b_, /*gradient_decay=*/false);
  allreducer_ = std::make_unique<GradientAllreducer>(
      ctx_.comm, ctx_.compression, trainable_part(w_).numel(), gradient_placement());
}

HpsgdScheduler::~HpsgdScheduler() = default;

std::string HpsgdScheduler::describe() const {
  if (!allreducer_) return "hpsgd (one rank: the optimizer's own steps)";
  const std::string when =
      period_ > 0 ? "every " + std::to_string(period_) + " iteration(s)"
                  : "whenever the previous round has finished on every rank (sync_period: auto)";
  return "hpsgd over " + std::to_string(ctx_.comm.size()) +
         " ranks, gradients accumulated on a replica and all-reduced " + when + ", " +
         allreducer_->describe();
}

bool HpsgdScheduler::round_due(int64_t t, EpochStats& stats) {
  if (period_ > 0) return (t + 1) % period_ == 0;
  if (next_round_ < 0) {
    {
      std::lock_guard lock(agreement_mutex_);
      if (!round_done_) {
        unpassed_ = t + 1;
        return false;
      }
    }
    // The comm thread proposed this very boundary: the round may start here, so wait for the
    // agreement (usually done already: it had the rest of this iteration).
    PhaseTimer timer(stats.phases, Phase::wait);
    DTRAIN_CHECK(agreement_.valid()) << "hpsgd: no agreement in flight";
    agreement_.get();
    next_round_ = agreed_;
    meet_ = agreed_lead_ > kMaxLead;
    if (agreed_lead_ > 0) ++uneven_agreements_;
  }
  DTRAIN_CHECK(next_round_ >= t) << "hpsgd: the ranks agreed on boundary " << next_round_
                                 << ", but this rank is already at " << t;
  return t == next_round_;
}

void HpsgdScheduler::train_replica(float lr, PhaseTimes& phases, bool step) {
  PhaseTimer timer(phases, Phase::update);
  Model& model = ctx_.model;
  Backend& backend = model.backend();
  const Tensor g = trainable_gradients(), r = trainable_part(model.parameters());
  const float ranks = static_cast<float>(ctx_.comm.size());
  // The replica's own gradient ĝ is ranks · g: clipped by its local norm, as a rank that
  // steps its own model clips (the 1e-6 of clip_coefficient is the norm's, not g's).
  if (ctx_.clip_grad_norm > 0) {
    const double norm = std::sqrt(backend.dot(g, g)) * ranks;
    const double coefficient = clip_coefficient(norm, ctx_.clip_grad_norm);
    if (coefficient < 1.0) backend.scale(g, static_cast<float>(coefficient));
  }
  if (linear_decay_) {
    // The model's gradient is ĝ / ranks (less the decay): a ← a + ĝ / ranks (a ← ĝ / ranks,
    // the first since the last round) and r ← r − μĝ, in one pass.
    sgd_step_accumulate(backend, r, g, trainable_part(a_), lr * ranks, *linear_decay_ / ranks,
                        accumulated_++ > 0);
    return;
  }
  const Tensor a = trainable_part(a_);
  if (accumulated_++ > 0)
    backend.axpy(1.0f, g, a);
  else
    backend.copy(a, g);
  // A decay added to the gradient (SGD's) is part of ĝ (the replica's step adds λr itself): a
  // gets λr / ranks.
  if (const float decay = ctx_.optimizer.gradient_decay(); decay != 0.0f)
    backend.axpy(decay / ranks, r, a);
  if (!step) return;        // r ← w follows: the replica's step would be dropped
  backend.scale(g, ranks);  // ĝ, the unit of w's state
  ctx_.optimizer.step(lr);
}

void HpsgdScheduler::restart_replica() {
  Backend& backend = ctx_.model.backend();
  backend.copy(trainable_part(ctx_.model.parameters()), trainable_part(w_));  // r ← w
  if (linear_decay_) return;                                                  // no state
  // The replica continues from w's optimizer state; what its own steps put in is dropped.
  const auto global = merge_->state_buffers();
  const auto replica = ctx_.optimizer.state_buffers();
  DTRAIN_CHECK(global.size() == replica.size()) << "hpsgd: optimizer states differ";
  for (size_t i = 0; i < global.size(); ++i) backend.copy(replica[i].second, global[i].second);
  for (const auto& [name, value] : merge_->counters()) ctx_.optimizer.load_counter(name, value);
}

void HpsgdScheduler::merge_round(float lr, PhaseTimes& phases) {
  if (!sum_pending_) return;
  if (round_.valid()) {
    PhaseTimer timer(phases, Phase::wait);
    round_.get();
  }
  PhaseTimer timer(phases, Phase::update);
  sum_pending_ = false;
  if (linear_decay_) {
    merge_->step(lr, w_, b_);  // w ← w − μ·b (b: the sum of the ranks' ĝ / ranks)
    return;
  }
  // The round's k iterations are k steps of w's optimizer, each with the round's mean gradient
  // b / k in place of its iteration's own (the sum no longer tells them apart): each gradient
  // weighs 1 in total, as in Eq. 1 (plain SGD's k steps of μ·b/k are its one step of μ·b),
  // and AdamW's step count and moments advance as sync's would.
  const int64_t k = std::max<int64_t>(sum_count_, 1);
  if (k > 1) ctx_.model.backend().scale(trainable_part(b_), 1.0f / static_cast<float>(k));
  for (int64_t step = 0; step < k; ++step) merge_->step(lr, w_, b_);
}

void HpsgdScheduler::start_round(int64_t t, float lr, PhaseTimes& phases) {
  train_replica(lr, phases, /*step=*/false);  // line 12 (r's step is void: r ← w follows)
  merge_round(lr, phases);                    // Algorithm 3, lines 1–3
  std::swap(a_, b_);
  sum_count_ = accumulated_;
  accumulated_ = 0;
  if (meet_) {
    // The paper's waiting phase (Fig. 1), when the agreement showed a rank ahead by more than
    // kMaxLead iterations: the ranks start this round together. Without it a faster rank would
    // drift ahead for a whole epoch, and its rounds, whose all-reduces wait for the slowest
    // rank, would span ever more of its iterations. The comm thread is idle here (the previous
    // round and its agreement are done), so the barrier runs at once, in the same place of the
    // all-reducer's order on every rank.
    PhaseTimer timer(phases, Phase::wait);
    allreducer_->then([](Comm& comm) { comm.barrier(); }).get();
    meet_ = false;
    ++epoch_meetings_;
  }
  if (period_ == 0) {
    std::lock_guard lock(agreement_mutex_);
    round_done_ = false;
    unpassed_ = t + 1;
  }
  round_ = allreducer_->start(trainable_part(b_));  // line 4, on the comm thread
  sum_pending_ = true;
  ++rounds_total_, ++epoch_rounds_;
  if (period_ == 0) {
    next_round_ = -1;
    agreement_ = allreducer_->then([this](Comm& comm) {
      int64_t mine;
      {
        std::lock_guard lock(agreement_mutex_);
        round_done_ = true;
        mine = unpassed_;
      }
      std::vector<double> proposals(static_cast<size_t>(comm.size()), 0.0);
      proposals[static_cast<size_t>(comm.rank())] = static_cast<double>(mine);
      comm.allreduce_sum(proposals);
      const auto [least, most] = std::minmax_element(proposals.begin(), proposals.end());
      agreed_ = static_cast<int64_t>(*most);
      agreed_lead_ = static_cast<int64_t>(*most - *least);
    });
  }
  PhaseTimer timer(phases, Phase::update);
  restart_replica();
}

EpochStats HpsgdScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  EpochStats stats;
  PhaseTimes& t = stats.phases;
  const auto epoch_start = Clock::now();
  epoch_rounds_ = epoch_meetings_ = 0;
  Batch batch;
  for (int64_t i = part.first; part.includes(i); ++i) {
    if (stop_requested()) break;  // every rank at the same iteration
    {
      PhaseTimer timer(t, Phase::data);
      if (!loader.next(batch)) break;
    }
    const float lr = lr_at(epoch, i);
    last_lr_ = lr;
    compute_gradients(batch, stats);
    if (!allreducer_) {
      PhaseTimer timer(t, Phase::update);
      if (ctx_.clip_grad_norm > 0)
        clip_grad_norm(ctx_.model.backend(), trainable_gradients(), ctx_.clip_grad_norm);
      ctx_.optimizer.step(lr);
    } else if (round_due(iteration_, stats)) {
      start_round(iteration_, lr, t);
    } else {
      train_replica(lr, t);
    }
    ++iteration_;
    finish_iteration(epoch, i, batch.rows(), stats);
  }
  stats.wall_s = seconds_since(epoch_start);
  if (allreducer_) {
    allreducer_->take_times(&t[Phase::comm], &t[Phase::compress]);
    t[Phase::comm] += carried_comm_s_, t[Phase::compress] += carried_compress_s_;
    carried_comm_s_ = carried_compress_s_ = 0;
  }
  epoch_iterations_ = stats.iterations;
  epoch_comm_s_ = t[Phase::comm] + t[Phase::compress];
  epoch_compute_s_ = stats.wall_s - t[Phase::wait];
  return stats;
}

void HpsgdScheduler::complete_inflight(PhaseTimes& phases) {
  PhaseTimer timer(phases, Phase::wait);
  if (round_.valid()) round_.get();
  if (agreement_.valid()) {
    agreement_.get();
    if (next_round_ < 0) next_round_ = agreed_, meet_ = agreed_lead_ > kMaxLead;
  }
}

void HpsgdScheduler::flush() {
  if (!allreducer_) return;
  PhaseTimes unused;
  complete_inflight(unused);
  // The round in flight was started by training: its time is reported with the next epoch.
  // flush's own all-reduce below is not training time, and is dropped.
  double comm = 0, compress = 0;
  allreducer_->take_times(&comm, &compress);
  carried_comm_s_ += comm, carried_compress_s_ += compress;
  merge_round(last_lr_, unused);
  if (accumulated_ > 0) {
    // What was accumulated since the last round: one more, at once, so that every gradient
    // reaches w (every rank accumulated as many: the rounds start at the same boundaries).
    std::swap(a_, b_);
    sum_count_ = accumulated_;
    accumulated_ = 0;
    round_ = allreducer_->start(trainable_part(b_));
    sum_pending_ = true;
    ++rounds_total_;
    merge_round(last_lr_, unused);
  }
  restart_replica();
  // Nothing is in flight: with `auto` the next boundary starts a round, on every rank alike.
  if (period_ == 0) next_round_ = iteration_;
  allreducer_->take_times(&comm, &compress);
}

std::vector<std::pair<std::string, std::string>> HpsgdScheduler::resolved_settings() const {
  if (period_ != 0 || rounds_total_ == 0) return {};
  const double mean = static_cast<double>(iteration_) / static_cast<double>(rounds_total_);
  return {{"algorithm.sync_period", std::to_string(std::max<int64_t>(1, std::llround(mean)))}};
}

std::string HpsgdScheduler::epoch_summary() const {
  if (!allreducer_ || epoch_iterations_ == 0) return "";
  const double iterations = static_cast<double>(epoch_iterations_);
  std::string s = fmt::format("hpsgd: {} synchronisation(s) in {} iterations", epoch_rounds_,
                              epoch_iterations_);
  if (epoch_meetings_ > 0)
    s += fmt::format(" ({} starting with the ranks' meeting)", epoch_meetings_);
  if (epoch_rounds_ == 0) return s;
  if (epoch_comm_s_ <= 0) return s + " (their all-reduces ended after the epoch)";
  // The paper's §3.2 arithmetic with this epoch's numbers: t_sync = k · t_train.
  const double t_train = epoch_compute_s_ / iterations;
  const double t_sync = epoch_comm_s_ / static_cast<double>(epoch_rounds_);
  const double k = t_sync / t_train;
  s += fmt::format(
      " (one per {:.1f}); an all-reduce takes {:.1f} ms = k {:.2f} iterations of "
      "{:.1f} ms",
      iterations / static_cast<double>(epoch_rounds_), t_sync * 1e3, k, t_train * 1e3);
  if (k > 0)
    s += fmt::format(
        ": in the time Local SGD with γ = {:.0f} trains {:.0f} times and synchronises once, "
        "HPSGD trains γ+k+1 = {:.1f} times and synchronises (γ+1)/k+1 = {:.1f} times",
        kPaperGamma, kPaperGamma + 1, kPaperGamma + k + 1, (kPaperGamma + 1) / k + 1);
  return s;
}

void HpsgdScheduler::save(SchedulerState& state) {
  Scheduler::save(state);
  state.set_counter("hpsgd.last_lr_bits", std::bit_cast<int32_t>(last_lr_));
  state.set_counter("hpsgd.iteration", iteration_);
  if (!allreducer_) return;
  PhaseTimes unused;
  complete_inflight(unused);  // the round in flight is saved as the sum it will be
  Backend& backend = ctx_.model.backend();
  state.put("hpsgd.global", w_, backend);
  state.put("hpsgd.accumulated", a_, backend);
  state.put("hpsgd.sum", b_, backend);
  state.set_counter("hpsgd.accumulated_count", accumulated_);
  state.set_counter("hpsgd.sum_pending", sum_pending_ ? 1 : 0);
  state.set_counter("hpsgd.sum_count", sum_count_);
  if (merge_) {  // w's optimizer state (the replica's is the base's "optimizer.*")
    for (const auto& [name, buffer] : merge_->state_buffers())
      state.put("hpsgd.global_optimizer." + name, buffer, backend);
    for (const auto& [name, value] : merge_->counters())
      state.set_counter("hpsgd.global_optimizer." + name, value);
  }
  state.set_counter("hpsgd.next_round", next_round_);
  state.set_counter("hpsgd.meet", meet_ ? 1 : 0);
}

void HpsgdScheduler::load(const SchedulerState& state) {
  Scheduler::load(state);
  last_lr_ = std::bit_cast<float>(static_cast<int32_t>(state.counter("hpsgd.last_lr_bits")));
  iteration_ = state.counter("hpsgd.iteration");
  if (!allreducer_) return;
  PhaseTimes unused;
  complete_inflight(unused);
  Backend& backend = ctx_.model.backend();
  state.get("hpsgd.global", w_, backend);
  state.get("hpsgd.accumulated", a_, backend);
  state.get("hpsgd.sum", b_, backend);
  accumulated_ = state.counter("hpsgd.accumulated_count");
  sum_pending_ = state.counter("hpsgd.sum_pending") != 0;
  sum_count_ = state.has("hpsgd.sum_count") ? state.counter("hpsgd.sum_count") : 0;
  if (merge_) {
    for (const auto& [name, buffer] : merge_->state_buffers())
      state.get("hpsgd.global_optimizer." + name, buffer, backend);
    for (const auto& [name, value] : merge_->counters())
      merge_->load_counter(name, state.counter("hpsgd.global_optimizer." + name));
  }
  // A state saved with a fixed period says nothing of `auto`'s next round: the next boundary.
  next_round_ = period_ == 0 ? std::max(state.counter("hpsgd.next_round"), iteration_) : 0;
  meet_ = state.has("hpsgd.meet") && state.counter("hpsgd.meet") != 0;
}

}  // namespace dtrain
