#include "sched/pipe_sgd_scheduler.h"

#include <fmt/format.h>  // the recommendation

#include <algorithm>  // sort, max, min
#include <bit>        // bit_cast: the learning rate as a counter, exactly
#include <limits>     // infinity: the fastest row

#include "core/error.h"

namespace dtrain {

Prediction predict_pipe_sgd(const TimingInputs& in, const CodecCost& codec, int K, int L) {
  L = std::max(L, 1);
  double compute = compute_seconds(in);
  // Eq. 6: L all-reduces of n/L elements each: 2(p−1)L·α + 2((p−1)/p)·n·β + ((p−1)/p)·n·γ +
  // L·S. The communication thread runs them, codec work included.
  CommCost one;
  if (in.p > 1) one = allreduce_cost(in, codec, static_cast<double>(in.n) / L);
  double comm = in.p > 1 ? L * (one.total() + in.sync_s) : 0;
  double iteration;
  if (K >= 2) {
    // Eq. 4/5/6: with limited resources the iteration is bound by whichever of computation
    // (l_up + l_for + l_back on the compute thread) and communication is longer, for any K ≥ 2.
    // Not in the paper: when the comm thread has no core of its own, its CPU work is also done
    // by the core that computes, partly time-sliced with it (share_core).
    const SharedCore shared = share_core(in, compute, comm, L * one.cpu_s);
    compute = shared.compute_s, comm = shared.comm_s;
    // The compute thread idles while communication is the longer of the two.
    compute += idle_penalty(in, comm - compute);
    iteration = std::max(compute, comm);
  } else {
    // K = 1 is D-Sync (Eq. 2); with L > 1 segments the first L−1 all-reduces may hide behind
    // the rest of the backward pass, but the last one is always exposed.
    const double hidden =
        std::min(comm * (L - 1.0) / L, in.l_back * slowest_slowdown(in) * (L - 1.0) / L);
    compute += idle_penalty(in, comm - hidden);
    iteration = compute + comm - hidden;
  }
  Prediction r = make_prediction(in, "pipe_sgd", codec, compute, comm, iteration);
  r.K = K;
  r.L = L;
  return r;
}

Recommendation recommend_pipe_sgd(const TimingInputs& in,
                                  const std::vector<Prediction>& predictions, int segments) {
  Recommendation rec;
  double best = std::numeric_limits<double>::infinity();
  for (const Prediction& r : predictions)
    if (r.iteration_s < best) best = r.iteration_s, rec.best = r;
  const double reference = reference_seconds(predictions);

  // K = 2, L = 1, and the least compression that makes Pipe-SGD compute-bound (the codecs are
  // in order of increasing loss); if none does, the fastest.
  std::vector<Prediction> pipes;
  for (const CodecCost& c : in.codecs) {
    Prediction r = predict_pipe_sgd(in, c, 2, 1);
    r.speedup = r.iteration_s > 0 && reference > 0 ? reference / r.iteration_s : 1;
    pipes.push_back(r);
  }
  bool found = false;
  for (const Prediction& r : pipes)
    if (r.compute_bound) {
      rec.fastest_pipe = r, found = true;
      break;
    }
  if (!found) {
    double fastest = std::numeric_limits<double>::infinity();
    for (const Prediction& r : pipes)
      if (r.iteration_s < fastest) fastest = r.iteration_s, rec.fastest_pipe = r;
  }
  const Prediction& pick = rec.fastest_pipe;
  rec.compute_bound = pick.compute_bound;

  // Eq. 5 vs Eq. 6: more segments only add latency and synchronisation per segment.
  std::string segmented;
  const CodecCost* codec = nullptr;
  for (const CodecCost& c : in.codecs)
    if (c.name == pick.compression) codec = &c;
  if (codec && segments > 1) {
    const Prediction seg = predict_pipe_sgd(in, *codec, 2, segments);
    if (seg.iteration_s < pick.iteration_s) rec.L = segments;
    segmented = fmt::format("; algorithm.segments={} predicts {:.2f} ms ({})", segments,
                            seg.iteration_s * 1e3,
                            rec.L == 1 ? "Eq. 6 > Eq. 5: keep L=1" : "faster: keep it");
  }

  const std::string bound =
      pick.compute_bound
          ? fmt::format(
                "compute-bound (comm {:.2f} ms <= compute {:.2f} ms): communication is "
                "hidden, scaling efficiency 1 (Eq. 7)",
                pick.comm_s * 1e3, pick.compute_s * 1e3)
          : fmt::format(
                "still communication-bound (comm {:.2f} ms > compute {:.2f} ms) with "
                "every codec: scaling efficiency {:.2f} (Eq. 7)",
                pick.comm_s * 1e3, pick.compute_s * 1e3,
                scaling_efficiency(pick.compute_s, pick.comm_s));
  rec.text = fmt::format(
      "algorithm.name=pipe_sgd, K=2, compression.name={}, sequential communication (L={}): "
      "{:.2f} ms/iteration, {:.2f}x sync+none; {}{}",
      pick.compression, rec.L, pick.iteration_s * 1e3, pick.speedup, bound, segmented);
  if (in.p <= 1)
    rec.text = "one rank: nothing to communicate, every algorithm runs at the compute time";
  else if (rec.best.iteration_s < 0.98 * pick.iteration_s)  // clearly faster, not noise
    rec.text += fmt::format("\n  (faster still in the table: {} + {}, {:.2f} ms/iteration)",
                            rec.best.algorithm, rec.best.compression, rec.best.iteration_s * 1e3);
  return rec;
}

AlgorithmEntry pipe_sgd_algorithm() {
  using namespace config;
  auto keys =
      Schema<PipeSgdOptions>("pipe_sgd")
          .key("K", &PipeSgdOptions::K, integer(Bounds::at_least(1)),
               "iteration dependency: the update at t uses the gradient of t − K (1 = D-Sync)")
          .key("warmup_epochs", &PipeSgdOptions::warmup_epochs, integer(Bounds::at_least(0)),
               "epochs of D-Sync before pipelining starts")
          .key("segments", &PipeSgdOptions::segments, integer(Bounds::at_least(1)),
               "gradient segments, each all-reduced as soon as backward has produced it");
  return {.name = "pipe_sgd",
          .summary =
              "Pipe-SGD (Li et al., NeurIPS 2018): the update at t uses the all-reduced "
              "gradient of t − K, so communication and its codec overlap the next iterations",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<PipeSgdScheduler, PipeSgdOptions>(),
          .predict =
              [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
                const auto& o = a.get<PipeSgdOptions>();
                return predict_pipe_sgd(in, codec, o.K, o.segments);
              },
          .recommend =
              [](const TimingInputs& in, const std::vector<Prediction>& rows,
                 const AlgorithmConfig& a) {
                return "recommendation (Pipe-SGD: K = 2, compute-bound after compression, "
                       "sequential communication):\n  " +
                       recommend_pipe_sgd(in, rows, a.get<PipeSgdOptions>().segments).text + "\n";
              },
          .plan_note =
              [](const AlgorithmConfig& a) {
                const auto& o = a.get<PipeSgdOptions>();
                if (o.K <= 1 || o.warmup_epochs <= 0) return std::string();
                return fmt::format(
                    "(algorithm.warmup_epochs={}: those epochs of pipe_sgd run as D-Sync, the "
                    "sync rows)\n",
                    o.warmup_epochs);
              },
          // The stale gradient is applied through Optimizer::step: any optimizer.
          .optimizers = {"sgd", "adamw"},
          // The all-reduced (stale) gradient is clipped as it is applied: the same on every rank.
          .clips_gradients = true,
          .equivalence = Equivalence::stale};
}

PipeSgdScheduler::PipeSgdScheduler(SchedulerContext ctx, const PipeSgdOptions& options)
    : Scheduler(std::move(ctx)),
      K_(options.K),
      warmup_epochs_(options.warmup_epochs),
      segments_(ctx_.model.trainable_offset(), ctx_.model.num_parameters(), options.segments) {
  DTRAIN_INPUT_CHECK(K_ >= 1) << "algorithm.K: must be >= 1, got " << K_;
  Model& model = ctx_.model;
  const int64_t n = model.num_parameters() - segments_.begin();

  // Slot 0 is the model's own buffer; the others are new. Frozen ranges stay zero.
  slots_.resize(static_cast<size_t>(K_));
  for (int k = 0; k < K_; ++k) {
    slots_[k].gradients =
        k == 0 ? model.gradients() : model.backend().zeros({model.num_parameters()});
    slots_[k].inflight.reserve(segments_.size());
  }
  if (ctx_.comm.size() > 1)
    allreducer_ =
        std::make_unique<GradientAllreducer>(ctx_.comm, ctx_.compression, n, gradient_placement());
}

PipeSgdScheduler::~PipeSgdScheduler() {
  // The communication thread may still be writing into a slot: let it finish first.
  for (Slot& slot : slots_)
    for (auto& f : slot.inflight)
      if (f.valid()) f.wait();
}

std::string PipeSgdScheduler::describe() const {
  std::string s = "pipe_sgd (K = " + std::to_string(K_);
  if (K_ == 1) s += ": D-Sync";
  if (warmup_epochs_ > 0 && K_ > 1)
    s += ", D-Sync for the first " + std::to_string(warmup_epochs_) + " epoch(s)";
  const size_t segments = segments_.size();
  s += segments == 1 ? ", sequential gradient communication"
                     : ", " + std::to_string(segments) + " gradient segments";
  s += ")";
  if (!allreducer_) return s + " on one rank";
  return s + " over " + std::to_string(ctx_.comm.size()) + " ranks, " + allreducer_->describe();
}

void PipeSgdScheduler::compute_into(Slot& slot, const Batch& batch, EpochStats& stats) {
  ctx_.model.set_gradients(slot.gradients);
  segments_started_ = 0;
  if (!allreducer_) {
    compute_gradients(batch, stats);
    return;
  }
  // One segment: the whole buffer goes after backward, as in the sync scheduler (Eq. 5);
  // several: each as soon as it is final (Eq. 6).
  auto start = [&](int64_t offset) {
    segments_.start_ready(*allreducer_, slot.gradients, offset, segments_started_, slot.inflight);
  };
  if (segments_.size() == 1)
    compute_gradients(batch, stats);
  else
    compute_gradients(batch, stats, start);
  start(segments_.begin());
}

void PipeSgdScheduler::complete(Slot& slot, EpochStats* stats) {
  if (slot.inflight.empty()) return;
  PhaseTimes unused;
  PhaseTimer t(stats ? stats->phases : unused, Phase::wait);
  for (auto& f : slot.inflight) f.get();
  slot.inflight.clear();
}

void PipeSgdScheduler::apply(Slot& slot, float lr, EpochStats* stats) {
  complete(slot, stats);
  PhaseTimes unused;
  PhaseTimer t(stats ? stats->phases : unused, Phase::update);
  // The all-reduced gradient of K iterations ago, identical on every rank: so is its clip.
  clip_gradients(trainable_part(slot.gradients));
  ctx_.optimizer.step(lr, ctx_.model.parameters(), slot.gradients);
  slot.iteration = -1;
}

EpochStats PipeSgdScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  EpochStats stats;
  const auto epoch_start = Clock::now();
  const bool pipelined = K_ > 1 && epoch >= warmup_epochs_;
  Batch batch;
  for (int64_t i = part.first; part.includes(i); ++i) {
    if (stop_requested()) break;  // every rank at the same iteration
    {
      PhaseTimer t(stats.phases, Phase::data);
      if (!loader.next(batch)) break;
    }
    const float lr = lr_at(epoch, i);
    last_lr_ = lr;
    Slot& slot = slots_[static_cast<size_t>(iteration_ % K_)];
    // Algorithm 1, lines 3–5: wait for the aggregated gradient of t − K and update with it.
    if (slot.iteration >= 0) apply(slot, lr, &stats);
    // Lines 6–10: this iteration's gradient; the communication thread takes it from here.
    compute_into(slot, batch, stats);
    if (pipelined) check_gradients(slot.gradients, iteration_ + 1);
    slot.iteration = iteration_++;
    if (!pipelined) apply(slot, lr, &stats);  // D-Sync: wait for it now
    finish_iteration(epoch, i, batch.rows(), stats);
  }
  stats.wall_s = seconds_since(epoch_start);
  if (allreducer_)
    allreducer_->take_times(&stats.phases[Phase::comm], &stats.phases[Phase::compress]);
  return stats;
}

void PipeSgdScheduler::flush() {
  std::vector<Slot*> pending;
  for (Slot& slot : slots_)
    if (slot.iteration >= 0) pending.push_back(&slot);
  std::sort(pending.begin(), pending.end(),
            [](const Slot* a, const Slot* b) { return a->iteration < b->iteration; });
  for (Slot* slot : pending) apply(*slot, last_lr_, nullptr);
}

void PipeSgdScheduler::save(SchedulerState& state) {
  Scheduler::save(state);
  Backend& backend = ctx_.model.backend();
  for (size_t k = 0; k < slots_.size(); ++k) {
    Slot& slot = slots_[k];
    complete(slot, nullptr);  // a sum in flight is saved as the sum it will be
    const std::string name = "pipe_sgd.slot" + std::to_string(k);
    state.put(name + ".gradients", slot.gradients, backend);
    state.set_counter(name + ".iteration", slot.iteration);
  }
  state.set_counter("pipe_sgd.iteration", iteration_);
  state.set_counter("pipe_sgd.last_lr_bits", std::bit_cast<int32_t>(last_lr_));
}

void PipeSgdScheduler::load(const SchedulerState& state) {
  Scheduler::load(state);
  Backend& backend = ctx_.model.backend();
  for (size_t k = 0; k < slots_.size(); ++k) {
    Slot& slot = slots_[k];
    complete(slot, nullptr);
    const std::string name = "pipe_sgd.slot" + std::to_string(k);
    state.get(name + ".gradients", slot.gradients, backend);
    slot.iteration = state.counter(name + ".iteration");
  }
  iteration_ = state.counter("pipe_sgd.iteration");
  last_lr_ = std::bit_cast<float>(static_cast<int32_t>(state.counter("pipe_sgd.last_lr_bits")));
}

}  // namespace dtrain
