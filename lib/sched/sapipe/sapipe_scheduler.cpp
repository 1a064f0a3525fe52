#include "sched/sapipe/sapipe_scheduler.h"

#include "nn/graph.h"  // Graph::recomputes_blocks

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>  // sort, nth_element
#include <bit>        // bit_cast: the learning rate and the norms as counters, exactly
#include <cmath>      // sqrt: the clipping norm
#include <utility>    // swap: dc's Δ and the next

#include "core/error.h"
#include "optim/clip.h"         // clip_coefficient
#include "plan/layer_timer.h"   // LayerTimer: `auto`'s per-layer times
#include "plan/stale_layers.h"  // choose_stale_layers

namespace dtrain {

namespace {

using sapipe_auto::kMaxAutoChecks;
using sapipe_auto::kSmallAllreduce;
using sapipe_auto::kTolerableWait;

// `auto`'s profile: D-Sync iterations, the first ones untimed (cold caches, first allocations).
constexpr int kProfileWarmup = 2, kProfileTimed = 6;
// `auto`'s check of its choice: pipelined iterations skipped (the pipeline filling), then timed
// (sapipe_algorithm.h: when k grows).
constexpr int kCheckSkipped = 2, kCheckTimed = 16;

bool predicts(const std::string& compensation) {
  return compensation == "wp1" || compensation == "wp2" || compensation == "wp3";
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

struct SapipeScheduler::Profile {
  Profile(Model& model, const std::vector<LayerRange>& layers) : timer(model, layers) {}
  LayerTimer timer;
  std::vector<double> comm_s;   // the whole all-reduce, per timed iteration
  std::vector<double> fixed_s;  // a small one
  int seen = 0;
  bool timing() const { return seen >= kProfileWarmup; }
  bool done() const { return seen >= kProfileWarmup + kProfileTimed; }
};

SapipeScheduler::SapipeScheduler(SchedulerContext ctx, const SapipeOptions& options)
    : Scheduler(std::move(ctx)), options_(options) {
  Model& model = ctx_.model;
  Backend& backend = model.backend();
  // Its pre-forward hooks change weights between a layer's forward and its backward: a
  // recomputed block would compute with other weights than its forward did.
  DTRAIN_INPUT_CHECK(!model.graph().recomputes_blocks())
      << "model.recompute: blocks cannot be used with sapipe (its weight updates between forward "
         "and backward would change the recomputed blocks); use model.recompute: none";
  DTRAIN_INPUT_CHECK(options_.compensation == "none" || ctx_.optimizer.prediction())
      << "optimizer.name: " << ctx_.optimizer.name()
      << " cannot predict its next step, which sapipe's compensation '" << options_.compensation
      << "' needs (compensation: none steps without it)";
  begin_ = model.trainable_offset();
  end_ = model.num_parameters();
  for (const LayerRange& layer : model.layer_ranges())
    if (layer.offset >= begin_ && layer.count > 0) layers_.push_back(layer);
  const int m = static_cast<int>(layers_.size());

  slots_.resize(2);
  for (size_t s = 0; s < slots_.size(); ++s) {
    slots_[s].gradients = s == 0 ? model.gradients() : backend.zeros({end_});
    if (predicts(options_.compensation))  // wp2 too: it falls back on wp1 at the start
      slots_[s].own = backend.zeros({end_});
  }
  if (options_.compensation == "dc") change_ = backend.zeros({end_});
  if (options_.compensation == "dc" || options_.compensation == "wp3")
    delta_ = backend.zeros({end_});
  if (predicts(options_.compensation)) master_ = backend.zeros({end_});
  if (ctx_.comm.size() > 1)
    allreducer_ = std::make_unique<GradientAllreducer>(ctx_.comm, ctx_.compression, end_ - begin_,
                                                       gradient_placement());

  const auto& k = options_.stale_layers;
  if (k.is("all")) {
    set_stale_layers(m);
  } else if (k.is("auto")) {
    profile_ = std::make_unique<Profile>(model, layers_);
  } else {
    DTRAIN_INPUT_CHECK(k.value <= m)
        << "algorithm.stale_layers: " << k.value << " is more than the model's " << m
        << " trainable parameterised layers (use `all` for all of them)";
    set_stale_layers(k.value);
  }
}

SapipeScheduler::~SapipeScheduler() {
  // The model may outlive the scheduler: its hook goes.
  if (k_ >= 0 && k_ < static_cast<int>(layers_.size()))
    ctx_.model.set_forward_hook(layers_[k_].name, {});
  // The communication thread may still be writing into a slot: let it finish first.
  for (Slot& slot : slots_) {
    for (auto& f : slot.fresh)
      if (f.valid()) f.wait();
    for (auto& f : slot.stale)
      if (f.valid()) f.wait();
  }
}

Tensor SapipeScheduler::prefix(const Tensor& flat) const {
  return flat.slice(begin_, {prefix_end_ - begin_});
}

void SapipeScheduler::set_stale_layers(int k) {
  const int m = static_cast<int>(layers_.size());
  if (k_ >= 0 && k_ < m) ctx_.model.set_forward_hook(layers_[k_].name, {});  // a loaded k
  fresh_segments_.reset();
  k_ = k;
  prefix_end_ = k < m ? layers_[k].offset : end_;
  if (prefix_end_ < end_) {
    fresh_segments_.emplace(prefix_end_, end_, options_.segments);
    // The paper's pre-forward hook: the fresh layers of t − 1 are stepped just before the
    // forward needs them, so their all-reduce overlaps the forward of the stale layers.
    ctx_.model.set_forward_hook(layers_[k].name, [this] {
      Slot& previous = slots_[static_cast<size_t>((iteration_ + 1) % 2)];
      if (!previous.fresh_pending) return;
      const auto start = Clock::now();
      wait(previous.fresh, hook_stats_);  // apply_fresh's own wait then finds the sum there
      hook_wait_s_ += seconds_since(start);
      apply_fresh(previous, hook_stats_);
      hook_s_ += seconds_since(start);
    });
  }
}

std::vector<std::pair<std::string, std::string>> SapipeScheduler::resolved_settings() const {
  if (!options_.stale_layers.is("auto") || k_ < 0) return {};
  return {{"algorithm.stale_layers", std::to_string(k_)}};
}

std::string SapipeScheduler::describe() const {
  std::string s = "sapipe (";
  const int m = static_cast<int>(layers_.size());
  if (k_ < 0) {
    s += "stale layers chosen after " + std::to_string(kProfileWarmup + kProfileTimed) +
         " profiled D-Sync iterations";
  } else {
    s += fmt::format("{} of {} layers stale", k_, m);
    if (k_ == 1) s += " (" + layers_[0].name + ")";
    if (k_ > 1) s += fmt::format(" ({}…{})", layers_[0].name, layers_[k_ - 1].name);
    s += fmt::format(", κ = {:.3f}", static_cast<double>(prefix_end_ - begin_) /
                                         static_cast<double>(std::max<int64_t>(1, end_ - begin_)));
  }
  s += ", compensation " + options_.compensation;
  if (options_.compensation == "dc" || options_.compensation == "wp3")
    s += fmt::format(" (λ = {}, {})", options_.dc_lambda, options_.dc_form);
  if (options_.warmup_epochs > 0)
    s += ", D-Sync for the first " + std::to_string(options_.warmup_epochs) + " epoch(s)";
  if (options_.segments > 1) s += ", " + std::to_string(options_.segments) + " fresh segments";
  s += ")";
  if (!allreducer_) return s + " on one rank";
  return s + " over " + std::to_string(ctx_.comm.size()) + " ranks, " + allreducer_->describe();
}

void SapipeScheduler::wait(std::vector<std::future<void>>& inflight, EpochStats* stats) {
  if (inflight.empty()) return;
  PhaseTimes unused;
  PhaseTimer t(stats ? stats->phases : unused, Phase::wait);
  for (auto& f : inflight) f.get();
  inflight.clear();
}

float SapipeScheduler::compensate(const Tensor& g) {
  Backend& backend = ctx_.model.backend();
  const float lambda = static_cast<float>(options_.dc_lambda);
  if (options_.dc_form == "diag") {
    backend.dc_diagonal(prefix(g), prefix(delta_), lambda);
    return 1.0f;
  }
  // The paper's Eq. 1: g + λ·g·(gᵀΔ) = (1 + λ·gᵀΔ)·g, with gᵀΔ summed in a fixed order.
  return 1.0f + lambda * static_cast<float>(backend.dot(prefix(g), prefix(delta_)));
}

double SapipeScheduler::clip(const Tensor& part, double other_squared_norm, double* squared_norm) {
  Backend& backend = ctx_.model.backend();
  *squared_norm = backend.dot(part, part);
  const double c =
      clip_coefficient(std::sqrt(*squared_norm + other_squared_norm), ctx_.clip_grad_norm);
  if (c < 1.0) backend.scale(part, static_cast<float>(c));
  return c;
}

void SapipeScheduler::prepare_stale(Slot& slot, EpochStats* stats) {
  if (slot.stale_prepared) return;
  wait(slot.stale, stats);
  PhaseTimes unused;
  PhaseTimer t(stats ? stats->phases : unused, Phase::update);
  // The slot's gradient is one optimizer step (AdamW's t): begun by its fresh part, or here
  // when there is none.
  if (prefix_end_ == end_) ctx_.optimizer.begin_step();
  if (ctx_.clip_grad_norm > 0)  // the whole gradient's norm: the prefix's and the fresh part's
    last_clip_ = clip(prefix(slot.gradients), prefix_end_ < end_ ? slot.fresh_squared_norm : 0,
                      &last_prefix_squared_norm_);
  slot.stale_prepared = true;
}

void SapipeScheduler::apply_stale(Slot& slot, float lr, EpochStats* stats,
                                  const Tensor* predict_with) {
  prepare_stale(slot, stats);
  PhaseTimes unused;
  PhaseTimer t(stats ? stats->phases : unused, Phase::update);
  Backend& backend = ctx_.model.backend();
  const Tensor& master = this->master();
  Optimizer& optimizer = ctx_.optimizer;
  if (options_.compensation == "dc") {
    // Algorithm 2: Δ = x_{t−1} − x_{t−2}, where the gradient is applied minus where it was
    // computed (the weights before the previous stale step): the previous stale step's change,
    // which that step wrote (only stale steps move the prefix; a flush zeroes it).
    if (has_previous_) {
      std::swap(delta_, change_);
      has_delta_ = true;
      const float factor = compensate(slot.gradients);
      if (factor != 1.0f) backend.scale(prefix(slot.gradients), factor);
    }
    has_previous_ = true;
  }
  const std::string& c = options_.compensation;
  if (predict_with)  // wp1, wp2: the step and the weight prediction in one pass
    predictor().step_predict_range(lr, master, slot.gradients, *predict_with,
                                   ctx_.model.parameters(), begin_, prefix_end_ - begin_);
  else if (c == "dc" || c == "wp3")  // the step and its change in one pass: dc's next Δ, wp3's Δx
    predictor().step_range_delta(lr, master, slot.gradients, c == "dc" ? change_ : delta_, begin_,
                                 prefix_end_ - begin_);
  else
    optimizer.step_range(lr, master, slot.gradients, begin_, prefix_end_ - begin_);
  if (c == "wp3") has_delta_ = true;  // Algorithm 3's Δx_t = x_{t−1} − x_{t−2}: the step taken
  slot.stale_pending = slot.stale_prepared = false;
}

void SapipeScheduler::apply_fresh(Slot& slot, EpochStats* stats) {
  wait(slot.fresh, stats);
  PhaseTimes unused;
  PhaseTimer t(stats ? stats->phases : unused, Phase::update);
  ctx_.optimizer.begin_step();  // the slot's gradient is one step; its prefix follows
  if (ctx_.clip_grad_norm > 0) {
    // The prefix's sum of this gradient is still in flight: its share of the norm is the last
    // stepped prefix's (exact where nothing is stale).
    const Tensor fresh = slot.gradients.slice(prefix_end_, {end_ - prefix_end_});
    clip(fresh, prefix_end_ > begin_ ? last_prefix_squared_norm_ : 0, &slot.fresh_squared_norm);
  }
  ctx_.optimizer.step_range(slot.lr, ctx_.model.parameters(), slot.gradients, prefix_end_,
                            end_ - prefix_end_);
  slot.fresh_pending = false;
}

void SapipeScheduler::step_and_predict_wp3(Slot& current, Slot& previous, float lr,
                                           EpochStats& stats) {
  prepare_stale(current, &stats);
  PhaseTimer t(stats.phases, Phase::update);
  Optimizer& optimizer = ctx_.optimizer;
  const Tensor& params = ctx_.model.parameters();
  const int64_t count = prefix_end_ - begin_;
  // The rank's own gradient of t − 1 is not applied yet: without it the master weights are the
  // newest there are (the first iteration, after a flush) and nothing is predicted.
  if (!previous.stale_pending || previous.iteration != iteration_ - 1) {
    optimizer.step_range(lr, master_, current.gradients, begin_, count);
    ctx_.model.backend().copy(prefix(params), prefix(master_));
  } else {
    // Algorithm 3: ĝ = DC(g', Δx_t) + c·g_{i,t}/n with g' = g_{t−1} − c·g_{i,t−1}/n and Δx_t the
    // step taken now; the outer DC is (1 + λ·g'ᵀΔx_t)·g'. Pass 1 steps, forms g' in place and sums
    // g'ᵀΔx_t; pass 2 predicts with ĝ formed element by element. c: the clipping coefficient of
    // the all-reduced gradient, which scales the own gradients as it scaled that one.
    const float n = static_cast<float>(ctx_.comm.size());
    const float c = ctx_.clip_grad_norm > 0 ? static_cast<float>(last_clip_) : 1.0f;
    const double dot = predictor().step_range_dot(lr, master_, current.gradients, -c / n,
                                                  current.own, delta_, begin_, count);
    const float factor = 1.0f + static_cast<float>(options_.dc_lambda) * static_cast<float>(dot);
    predictor().predict_range_sum(lr, params, master_,
                                  GradientSum{c / n, previous.own, factor, current.gradients},
                                  begin_, count);
  }
  current.stale_pending = current.stale_prepared = false;
}

const Tensor* SapipeScheduler::prediction_gradient(Slot& current, Slot& previous, bool stepped) {
  // The rank's own gradient of t − 1, not applied yet: without it the master weights are already
  // the newest there are (the first iteration, after a flush) and nothing is predicted.
  if (!previous.stale_pending || previous.iteration != iteration_ - 1) return nullptr;
  Backend& backend = ctx_.model.backend();
  const float n = static_cast<float>(ctx_.comm.size());
  std::string option = options_.compensation;
  if (!stepped) option = "wp1";  // no all-reduced gradient yet: the paper's code falls back
  // Clipping: the own gradients are scaled by the latest all-reduced gradient's coefficient c,
  // as that gradient was (a rank's own norm would differ from rank to rank).
  const float c = stepped && ctx_.clip_grad_norm > 0 ? static_cast<float>(last_clip_) : 1.0f;
  if (option == "wp1") {                                   // g_{i,t}
    if (c < 1.0f) backend.scale(prefix(previous.own), c);  // used once: by this prediction
    return &previous.own;
  }
  if (option == "wp2") return &current.gradients;  // g_{t−1}: the sum just stepped with
  // wp3: DC(g_{t−1} − g_{i,t−1}/n, Δx_t) + g_{i,t}/n, in two passes, in place: the slot's sum
  // has been stepped with, and this iteration's backward overwrites it. The outer DC's gᵀΔ is
  // summed in the first pass.
  const Tensor& g = current.gradients;
  float factor = 1.0f;
  if (has_delta_ && options_.dc_form == "outer") {
    const double dot =
        backend.axpby_dot(-c / n, prefix(current.own), 1.0f, prefix(g), prefix(delta_));
    factor = 1.0f + static_cast<float>(options_.dc_lambda) * static_cast<float>(dot);
  } else {
    backend.axpby(-c / n, prefix(current.own), 1.0f, prefix(g));
    if (has_delta_) factor = compensate(g);
  }
  backend.axpby(c / n, prefix(previous.own), factor, prefix(g));
  return &g;
}

const Tensor& SapipeScheduler::master() const {
  return master_apart_ ? master_ : ctx_.model.parameters();
}

void SapipeScheduler::keep_master_apart() {
  if (master_apart_) return;
  ctx_.model.backend().copy(prefix(master_), prefix(ctx_.model.parameters()));
  master_apart_ = true;
}

void SapipeScheduler::master_into_model() {
  if (!master_apart_) return;
  ctx_.model.backend().copy(prefix(ctx_.model.parameters()), prefix(master_));
  master_apart_ = false;
}

void SapipeScheduler::run_dsync(Slot& slot, const Batch& batch, float lr, EpochStats& stats) {
  Model& model = ctx_.model;
  model.set_gradients(slot.gradients);
  const bool timing = profile_ && profile_->timing();
  if (timing) {
    profile_->timer.begin();
    compute_gradients(batch, stats, [this](int64_t offset) { profile_->timer.on_ready(offset); });
    profile_->timer.end();
  } else {
    compute_gradients(batch, stats);
  }
  if (allreducer_) {
    const auto start = Clock::now();
    slot.stale.push_back(allreducer_->start(slot.gradients.slice(begin_, {end_ - begin_})));
    wait(slot.stale, &stats);
    if (timing) profile_->comm_s.push_back(seconds_since(start));
  }
  {
    PhaseTimer t(stats.phases, Phase::update);
    if (ctx_.clip_grad_norm > 0) {
      // The whole gradient's norm; the prefix's share is kept for the fresh layers' next clip.
      Backend& backend = model.backend();
      const int64_t split = std::clamp(prefix_end_, begin_, end_);
      last_prefix_squared_norm_ = 0;
      if (split > begin_) {
        const Tensor head = slot.gradients.slice(begin_, {split - begin_});
        last_prefix_squared_norm_ = backend.dot(head, head);
      }
      double rest = 0;  // the rest's squared norm: with the head's, the whole gradient's
      last_clip_ =
          split < end_
              ? clip(slot.gradients.slice(split, {end_ - split}), last_prefix_squared_norm_, &rest)
              : clip_coefficient(std::sqrt(last_prefix_squared_norm_), ctx_.clip_grad_norm);
      if (last_clip_ < 1.0 && split > begin_)  // the head by the same coefficient
        backend.scale(slot.gradients.slice(begin_, {split - begin_}),
                      static_cast<float>(last_clip_));
    }
    ctx_.optimizer.begin_step();
    ctx_.optimizer.step_range(lr, model.parameters(), slot.gradients, begin_, end_ - begin_);
  }
  if (timing && allreducer_) {
    // The fixed cost of an all-reduce, on a few floats of the spent gradient.
    const int64_t small = std::min(kSmallAllreduce, end_ - begin_);
    const auto start = Clock::now();
    slot.stale.push_back(allreducer_->start(slot.gradients.slice(end_ - small, {small})));
    wait(slot.stale, &stats);
    profile_->fixed_s.push_back(seconds_since(start));
  }
  slot.iteration = -1;
  slot.fresh_pending = slot.stale_pending = false;
  if (profile_) ++profile_->seen;
}

void SapipeScheduler::run_pipelined(Slot& current, Slot& previous, const Batch& batch, float lr,
                                    EpochStats& stats) {
  Model& model = ctx_.model;
  Backend& backend = model.backend();
  // Algorithm 1: the stale prefix of t − 2 (its fresh part went at t − 1's hook).
  if (predicts(options_.compensation) && prefix_end_ > begin_) keep_master_apart();
  if (current.fresh_pending) apply_fresh(current, &stats);
  const bool stepped = current.stale_pending;
  // Algorithm 3: the prefix runs on the predicted weights x̃, written into the model from the
  // master prefix, which the scheduler keeps apart (no copy back afterwards). wp1's and wp2's ĝ
  // are known before the step: the step writes the prediction too. wp3's depends on the step.
  // wp3 with the outer DC: two passes (step_and_predict_wp3).
  const bool wp3_fused =
      stepped && master_apart_ && options_.compensation == "wp3" && options_.dc_form == "outer";
  const bool fused = stepped && master_apart_ && options_.compensation != "wp3";
  // Clipping: the prediction scales by the coefficient of the gradient about to be stepped with.
  if (fused && ctx_.clip_grad_norm > 0) prepare_stale(current, &stats);
  const Tensor* fused_ghat = fused ? prediction_gradient(current, previous, true) : nullptr;
  if (wp3_fused)
    step_and_predict_wp3(current, previous, lr, stats);
  else if (stepped)
    apply_stale(current, lr, &stats, fused_ghat);
  if (master_apart_ && !fused_ghat && !wp3_fused) {
    PhaseTimer t(stats.phases, Phase::update);
    const Tensor& params = model.parameters();
    if (const Tensor* ghat = prediction_gradient(current, previous, stepped))
      predictor().predict_range(lr, params, master_, *ghat, begin_, prefix_end_ - begin_);
    else
      backend.copy(prefix(params), prefix(master_));
  }

  model.set_gradients(current.gradients);
  segments_started_ = 0;
  hook_stats_ = &stats;
  hook_s_ = 0;
  auto start_ready = [&](int64_t offset) {
    if (allreducer_ && fresh_segments_)
      fresh_segments_->start_ready(*allreducer_, current.gradients, offset, segments_started_,
                                   current.fresh);
  };
  compute_gradients(batch, stats, start_ready);
  check_gradients(current.gradients, iteration_ + 1);
  stats.phases[Phase::forward] -= hook_s_;  // the hook's wait and update are counted as such
  hook_stats_ = nullptr;
  start_ready(begin_);
  if (prefix_end_ > begin_) {
    // The own gradient before the sum replaces it: wp1 and wp3 predict with it, wp2 only until
    // it has an all-reduced gradient.
    // The slot holds g_i / n (the all-reduce sums it to the mean); own keeps g_i, in one pass.
    const bool own_needed = options_.compensation != "wp2" || !stepped;
    if (current.own.defined() && own_needed) {
      PhaseTimer t(stats.phases, Phase::update);
      backend.scale_copy(prefix(current.own), prefix(current.gradients),
                         static_cast<float>(ctx_.comm.size()));
    }
    if (allreducer_) current.stale.push_back(allreducer_->start(prefix(current.gradients)));
  }
  current.iteration = iteration_;
  current.lr = lr;
  current.fresh_pending = prefix_end_ < end_;
  current.stale_pending = prefix_end_ > begin_;
}

void SapipeScheduler::decide_stale_layers() {
  std::vector<LayerCost> layers = profile_->timer.means();
  const double comm = median(profile_->comm_s);
  const double fixed = std::min(comm, median(profile_->fixed_s));
  const double total = static_cast<double>(std::max<int64_t>(1, end_ - begin_));
  for (size_t i = 0; i < layers.size(); ++i)
    layers[i].comm_s = (comm - fixed) * static_cast<double>(layers_[i].count) / total;
  const StaleChoice choice = choose_stale_layers(layers, fixed);
  // Rank 0's timings decide for every rank: noisy clocks never split the job.
  std::string k = std::to_string(choice.k);
  ctx_.comm.broadcast(k, 0);
  profile_.reset();  // its hooks go before the scheduler's own
  set_stale_layers(std::stoi(k));
  check_ = AutoCheck{layers, fixed};
  check_.active = k_ < static_cast<int>(layers_.size());  // all stale: no hook to wait in
  if (ctx_.comm.rank() != 0) return;
  double forward = 0, backward = 0;
  for (const LayerCost& l : layers) forward += l.forward_s, backward += l.backward_s;
  spdlog::info(
      "sapipe: stale_layers auto → {}; profile of {} D-Sync iterations: forward {:.3f} ms, "
      "backward {:.3f} ms, all-reduce {:.3f} ms of which {:.3f} ms fixed ({}); predicted iteration "
      "{:.3f} ms, stall "
      "{:.3f} ms",
      describe(), kProfileTimed, forward * 1e3, backward * 1e3, comm * 1e3, fixed * 1e3,
      choice.communication_bound ? "communication-bound: the least k of shortest iteration"
                                 : "C1 holds: the least k with C2",
      choice.iteration_s * 1e3, choice.stall_s * 1e3);
}

void SapipeScheduler::check_stale_layers() {
  const int m = static_cast<int>(layers_.size());
  const double wait = check_.wait_s / check_.iterations, wall = check_.wall_s / check_.iterations;
  ++check_.checks;
  std::string decision = std::to_string(k_);
  if (wait > kTolerableWait * wall) {
    const int k = grow_stale_layers(check_.layers, check_.fixed_s, k_, wait);
    decision = std::to_string(k);
    if (ctx_.comm.rank() == 0)
      spdlog::info(
          "sapipe: stale_layers auto: the next forward waited {:.3f} ms of a {:.3f} ms iteration "
          "for the fresh layers' sum, which the profile's model did not foresee ({}; beside "
          "the computation the all-reduce runs slower than alone); stale layers {} → {}",
          wait * 1e3, wall * 1e3,
          fresh_segments_->size() == 1
              ? fmt::format("with one segment their all-reduce starts after layer {}'s backward",
                            k_ + 1)
              : fmt::format("in {} segments", fresh_segments_->size()),
          k_, k);
  }
  ctx_.comm.broadcast(decision, 0);  // rank 0's measurement decides for every rank
  const int k = std::stoi(decision);
  check_.iterations = 0;
  check_.wait_s = check_.wall_s = 0;
  check_.active = k != k_ && k < m && check_.checks < kMaxAutoChecks;
  if (k != k_) {
    flush();  // the pipeline empties, as before an evaluation; it refills with the new split
    set_stale_layers(k);
  }
}

EpochStats SapipeScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  EpochStats stats;
  const auto epoch_start = Clock::now();
  const bool warm = epoch < options_.warmup_epochs;
  Batch batch;
  for (int64_t i = part.first; part.includes(i); ++i) {
    if (stop_requested()) break;  // every rank at the same iteration
    {
      PhaseTimer t(stats.phases, Phase::data);
      if (!loader.next(batch)) break;
    }
    const float lr = lr_at(epoch, i);
    last_lr_ = lr;
    Slot& current = slots_[static_cast<size_t>(iteration_ % 2)];
    Slot& previous = slots_[static_cast<size_t>((iteration_ + 1) % 2)];
    if (k_ < 0 || warm) {
      flush();  // nothing in flight when D-Sync starts
      run_dsync(current, batch, lr, stats);
    } else {
      const auto start = Clock::now();
      hook_wait_s_ = 0;
      run_pipelined(current, previous, batch, lr, stats);
      if (check_.active && ++check_.iterations > kCheckSkipped) {
        check_.wait_s += hook_wait_s_;
        check_.wall_s += seconds_since(start);
      }
    }
    ++iteration_;
    finish_iteration(epoch, i, batch.rows(), stats);
    if (profile_ && profile_->done()) decide_stale_layers();
    if (check_.active && check_.iterations == kCheckSkipped + kCheckTimed) {
      check_.iterations -= kCheckSkipped;
      check_stale_layers();
    }
  }
  stats.wall_s = seconds_since(epoch_start);
  if (allreducer_)
    allreducer_->take_times(&stats.phases[Phase::comm], &stats.phases[Phase::compress]);
  return stats;
}

void SapipeScheduler::flush() {
  std::vector<Slot*> pending;
  for (Slot& slot : slots_)
    if (slot.fresh_pending || slot.stale_pending) pending.push_back(&slot);
  std::sort(pending.begin(), pending.end(),
            [](const Slot* a, const Slot* b) { return a->iteration < b->iteration; });
  for (Slot* slot : pending) {
    if (slot->fresh_pending) apply_fresh(*slot, nullptr);
    if (slot->stale_pending) apply_stale(*slot, last_lr_, nullptr);
  }
  // The next gradients are computed at these weights: dc's next Δ is zero.
  if (has_previous_ && !pending.empty()) ctx_.model.backend().fill_zero(prefix(change_));
  master_into_model();
}

std::vector<float> SapipeScheduler::last_delta() const {
  if (!has_delta_) return {};
  Backend& backend = ctx_.model.backend();
  Tensor host = Tensor::empty({prefix_end_ - begin_}, DType::f32, cpu_allocator());
  backend.copy(host, prefix(delta_));
  backend.synchronize();
  return {host.data<float>(), host.data<float>() + host.numel()};
}

void SapipeScheduler::save(SchedulerState& state) {
  Backend& backend = ctx_.model.backend();
  if (master_apart_) {
    // The state holds the master weights (the model's x̃ is not needed again: the next
    // iteration predicts anew from the master).
    master_into_model();
    Scheduler::save(state);
    keep_master_apart();
  } else {
    Scheduler::save(state);
  }
  state.set_counter("sapipe.master_apart", master_apart_);
  for (size_t s = 0; s < slots_.size(); ++s) {
    Slot& slot = slots_[s];
    wait(slot.fresh, nullptr);  // a sum in flight is saved as the sum it will be
    wait(slot.stale, nullptr);
    const std::string name = "sapipe.slot" + std::to_string(s);
    state.put(name + ".gradients", slot.gradients, backend);
    if (slot.own.defined()) state.put(name + ".own", slot.own, backend);
    state.set_counter(name + ".iteration", slot.iteration);
    state.set_counter(name + ".lr_bits", std::bit_cast<int32_t>(slot.lr));
    state.set_counter(name + ".fresh_pending", slot.fresh_pending);
    state.set_counter(name + ".stale_pending", slot.stale_pending);
    state.set_counter(name + ".fresh_squared_norm_bits",
                      std::bit_cast<int64_t>(slot.fresh_squared_norm));
  }
  if (change_.defined()) state.put("sapipe.change", change_, backend);
  if (delta_.defined()) state.put("sapipe.delta", delta_, backend);
  state.set_counter("sapipe.has_previous", has_previous_);
  state.set_counter("sapipe.has_delta", has_delta_);
  state.set_counter("sapipe.stale_layers", k_);
  state.set_counter("sapipe.iteration", iteration_);
  state.set_counter("sapipe.last_lr_bits", std::bit_cast<int32_t>(last_lr_));
  state.set_counter("sapipe.last_clip_bits", std::bit_cast<int64_t>(last_clip_));
  state.set_counter("sapipe.last_prefix_squared_norm_bits",
                    std::bit_cast<int64_t>(last_prefix_squared_norm_));
}

void SapipeScheduler::load(const SchedulerState& state) {
  Scheduler::load(state);
  Backend& backend = ctx_.model.backend();
  for (size_t s = 0; s < slots_.size(); ++s) {
    Slot& slot = slots_[s];
    wait(slot.fresh, nullptr);
    wait(slot.stale, nullptr);
    const std::string name = "sapipe.slot" + std::to_string(s);
    state.get(name + ".gradients", slot.gradients, backend);
    if (slot.own.defined()) state.get(name + ".own", slot.own, backend);
    slot.iteration = state.counter(name + ".iteration");
    slot.lr = std::bit_cast<float>(static_cast<int32_t>(state.counter(name + ".lr_bits")));
    slot.fresh_pending = state.counter(name + ".fresh_pending") != 0;
    slot.stale_pending = state.counter(name + ".stale_pending") != 0;
    slot.fresh_squared_norm =
        std::bit_cast<double>(state.counter(name + ".fresh_squared_norm_bits"));
  }
  if (change_.defined()) state.get("sapipe.change", change_, backend);
  if (delta_.defined()) state.get("sapipe.delta", delta_, backend);
  has_previous_ = state.counter("sapipe.has_previous") != 0;
  has_delta_ = state.counter("sapipe.has_delta") != 0;
  const int k = static_cast<int>(state.counter("sapipe.stale_layers"));
  if (k >= 0 && k != k_) {
    profile_.reset();
    set_stale_layers(k);
  }
  iteration_ = state.counter("sapipe.iteration");
  last_lr_ = std::bit_cast<float>(static_cast<int32_t>(state.counter("sapipe.last_lr_bits")));
  last_clip_ = std::bit_cast<double>(state.counter("sapipe.last_clip_bits"));
  last_prefix_squared_norm_ =
      std::bit_cast<double>(state.counter("sapipe.last_prefix_squared_norm_bits"));
  master_apart_ = false;  // the model holds the master weights now
  if (state.counter("sapipe.master_apart") != 0) keep_master_apart();
}

}  // namespace dtrain
