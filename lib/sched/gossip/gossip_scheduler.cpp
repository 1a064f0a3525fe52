#include "sched/gossip/gossip_scheduler.h"

#include <algorithm>  // min, max: a part's target
#include <chrono>
#include <deque>
#include <optional>  // the server's quiet spell
#include <sstream>   // the neighbour generator's state in a checkpoint
#include <thread>

#include "comm/tags.h"           // kGossipHeader, kGossipModel, kGossipCount, kGossipStop
#include "comm/wait_watchdog.h"  // WaitGuard: the server's quiet spells are bounded
#include "core/error.h"
#include "core/stop_request.h"  // stop_signal: a rank asked to stop ends the part for all

namespace dtrain {

namespace {

enum class Request : int32_t { exchange = 1, done = 2 };
struct Header {
  Request kind = Request::exchange;
  int32_t epoch = 0;
};
struct Count {
  int64_t epoch = 0, updates = 0, final = 0;
  int64_t stop = 0;  // the sender was asked to stop (a signal): the part ends for all
};

}  // namespace

GossipScheduler::GossipScheduler(SchedulerContext ctx, const GossipOptions& options)
    : Scheduler(std::move(ctx)), topology_(topology_named(options.topology)) {
  Comm& comm = ctx_.comm;
  const int p = comm.size();
  DTRAIN_INPUT_CHECK(p == 1 || p % 2 == 0)
      << "algorithm.name: gossip needs an even number of ranks (or 1): its graph is bipartite, "
         "odd ranks active and even ones passive; got "
      << p << " ranks";
  DTRAIN_INPUT_CHECK(ctx_.compression == "none")
      << "compression.name: gossip exchanges whole models, uncompressed; got '" << ctx_.compression
      << "' (use none)";
  weights_ = trainable_part(ctx_.model.parameters());
  // N/M updates an epoch: the loader takes the local batch from the whole set.
  target_ = ctx_.iterations_per_epoch;
  rng_.seed(0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(comm.rank()));
  if (p == 1) return;
  models_ = comm.split(0, comm.rank());
  control_ = comm.unpaced().split(0, comm.rank());
  neighbours_ = topology_neighbours(topology_, comm.rank(), p);
  for (int j : neighbours_) active_neighbours_ += j % 2 == 1 ? 1 : 0;
  const size_t n = static_cast<size_t>(weights_.numel());
  mirror_.assign(n, 0.0f);
  theirs_.assign(n, 0.0f);
  Backend& backend = ctx_.model.backend();
  host_ = std::make_unique<HostMirror>(backend, weights_);
  host_->download();
  pending_ = Tensor::empty(weights_.shape(), DType::f32, backend.host_allocator());
  std::fill_n(pending_.data<float>(), n, 0.0f);
  if (backend.device() != Device::cpu) pending_on_device_ = backend.empty(weights_.shape());
  averager_ = std::make_unique<ModelAverager>(ctx_.model, comm, gradient_placement());
}

// A server still waiting for its epoch's requests (an exception left run_epoch) gives up, so that
// its thread can be joined and the error reach main (which ends every rank).
GossipScheduler::~GossipScheduler() {
  abandon_ = true;
}

std::string GossipScheduler::describe() const {
  const int p = ctx_.comm.size();
  if (p == 1) return "gossip (one rank: plain SGD)";
  std::string ns;
  for (int j : neighbours_) ns += (ns.empty() ? "" : ", ") + std::to_string(j);
  return "gossip (AD-PSGD) over " + std::to_string(p) + " ranks, " +
         (topology_ == Topology::ring ? "ring" : "exponential") + " topology: rank " +
         std::to_string(ctx_.comm.rank()) +
         (active() ? " (active) averages with one of " : " (passive) answers ") + ns;
}

void GossipScheduler::snapshot() {
  std::lock_guard lock(model_mutex_);
  const float* x = host_->host().data<float>();
  const float* pending = pending_.data<float>();
  for (size_t e = 0; e < mirror_.size(); ++e) mirror_[e] = x[e] + pending[e];
}

void GossipScheduler::add_difference() {
  std::lock_guard lock(model_mutex_);
  float* pending = pending_.data<float>();
  for (size_t e = 0; e < mirror_.size(); ++e) pending[e] += 0.5f * (theirs_[e] - mirror_[e]);
}

void GossipScheduler::exchange() {
  std::uniform_int_distribution<size_t> pick(0, neighbours_.size() - 1);
  const int peer = neighbours_[pick(rng_)];
  const size_t bytes = mirror_.size() * sizeof(float);
  snapshot();
  const Header header{Request::exchange, 0};
  control_->send(&header, sizeof header, peer, tags::kGossipHeader);
  models_->send(mirror_.data(), bytes, peer, tags::kGossipModel);
  models_->recv(theirs_.data(), bytes, peer, tags::kGossipModel);
  add_difference();
  ++started_;
}

void GossipScheduler::answer(int peer) {
  PhaseTimer t(answer_s_, Phase::comm);
  const size_t bytes = mirror_.size() * sizeof(float);
  models_->recv(theirs_.data(), bytes, peer, tags::kGossipModel);
  snapshot();
  models_->send(mirror_.data(), bytes, peer, tags::kGossipModel);
  add_difference();
  ++served_;
}

void GossipScheduler::tally(int peer, int epoch) {
  Count c;
  control_->recv(&c, sizeof c, peer, tags::kGossipCount);
  if (c.epoch != epoch) return;  // cannot happen: a barrier separates the epochs
  counts_[static_cast<size_t>(peer)] = c.updates;
  if (c.final) ++finals_;
  int64_t total = 0;
  for (int64_t u : counts_) total += u;
  if (!announced_ && (total >= target_ || c.stop != 0)) {
    announced_ = true;
    stop_ = true;
    const int64_t e = epoch;
    for (int r = 1; r < control_->size(); ++r) control_->send(&e, sizeof e, r, tags::kGossipStop);
  }
}

void GossipScheduler::serve(int epoch) {
  const bool tallies = ctx_.comm.rank() == 0;
  const int p = ctx_.comm.size();
  int done = 0;
  // Polls with a growing sleep: the ranks share cores, and a blocking MPI receive would spin.
  auto idle = std::chrono::microseconds(20);
  std::optional<WaitGuard> quiet;  // since the last message: bounded by cluster.timeout_s
  while ((done < active_neighbours_ || (tallies && finals_ < p)) && !abandon_) {
    bool busy = false;
    if (std::optional<int> peer = control_->probe_any(tags::kGossipHeader)) {
      Header h;
      control_->recv(&h, sizeof h, *peer, tags::kGossipHeader);
      if (h.kind == Request::done)
        ++done;
      else
        answer(*peer);
      busy = true;
    }
    if (tallies)  // all the counts that arrived: the end of the epoch is seen promptly
      while (std::optional<int> peer = control_->probe_any(tags::kGossipCount)) {
        tally(*peer, epoch);
        busy = true;
      }
    if (busy) {
      idle = std::chrono::microseconds(20);
      quiet.reset();
    } else {
      if (!quiet) quiet.emplace("gossip requests", -1);
      std::this_thread::sleep_for(idle);
      idle = std::min(idle * 2, std::chrono::microseconds(200));
    }
  }
  if (tallies && !announced_ && !abandon_) {  // every rank ran out of iterations first
    announced_ = true;
    const int64_t e = epoch;
    for (int r = 1; r < p; ++r) control_->send(&e, sizeof e, r, tags::kGossipStop);
  }
}

void GossipScheduler::apply_pending() {
  if (!pending_.defined()) return;
  Backend& backend = ctx_.model.backend();
  if (pending_on_device_.defined()) {
    backend.copy(pending_on_device_, pending_);
    backend.axpy(1.0f, pending_on_device_, weights_);
    backend.synchronize();  // pending_ is zeroed next
  } else {
    backend.axpy(1.0f, pending_, weights_);
  }
  std::fill_n(pending_.data<float>(), pending_.numel(), 0.0f);
}

void GossipScheduler::update(float lr, EpochStats& stats) {
  PhaseTimer t(stats.phases, Phase::update);
  // This rank's own gradient (the local norm); the exchanges touch the weights, not it.
  clip_gradients(trainable_gradients());
  std::lock_guard lock(model_mutex_);
  apply_pending();
  ctx_.optimizer.step(lr);
  if (host_) host_->download();  // a GPU model's host copy, for the exchanges (CPU: itself)
}

// One epoch's messages besides the exchanges: the server's run, the end announced by rank 0,
// the counts in flight. Lives in run_epoch's frame (the receive of the end writes into it).
struct GossipScheduler::EpochTraffic {
  std::future<void> serving;
  std::unique_ptr<CommRequest> stop_message;
  int64_t stop_epoch = -1;
  std::deque<std::pair<std::unique_ptr<Count>, std::unique_ptr<CommRequest>>> counts;
};

void GossipScheduler::open_epoch(EpochTraffic& traffic, int epoch) {
  {
    std::lock_guard lock(model_mutex_);
    host_->download();  // the model may have been set since the last update (a restore)
  }
  const int rank = ctx_.comm.rank();
  if (rank == 0)
    counts_.assign(static_cast<size_t>(ctx_.comm.size()), 0), finals_ = 0, announced_ = false;
  if (!active()) traffic.serving = server_.submit([this, epoch] { serve(epoch); }, Phase::wait);
  if (rank != 0)
    traffic.stop_message =
        control_->irecv(&traffic.stop_epoch, sizeof traffic.stop_epoch, 0, tags::kGossipStop);
}

bool GossipScheduler::next_batch(Loader& loader, int epoch, Batch& batch, EpochStats& stats) {
  PhaseTimer t(stats.phases, Phase::data);
  if (!loader.next(batch)) {
    if (ctx_.comm.size() == 1) return false;  // one rank: an epoch is one pass
    // A fast rank samples on: another pass over the whole set, in another order.
    consumed_ = 0;
    loader.start_epoch(epoch + 100000 * ++passes_);
    if (!loader.next(batch)) return false;
  }
  ++consumed_;
  return true;
}

void GossipScheduler::report_count(EpochTraffic& traffic, int epoch, int64_t updates) {
  auto& counts = traffic.counts;
  while (!counts.empty() && counts.front().second->test()) counts.pop_front();
  auto c = std::make_unique<Count>(Count{epoch, updates, 0, stop_signal() != 0 ? 1 : 0});
  auto request = control_->isend(c.get(), sizeof(Count), 0, tags::kGossipCount);
  counts.emplace_back(std::move(c), std::move(request));
}

void GossipScheduler::abandon_epoch(EpochTraffic& traffic) {
  // Nobody will end this epoch: the server gives up, and the receive of the end and the
  // counts in flight are abandoned (waiting for them would hang instead of reaching main).
  abandon_ = true;
  traffic.stop_message.release();
  for (auto& [c, request] : traffic.counts) c.release(), request.release();
}

void GossipScheduler::close_epoch(EpochTraffic& traffic, int epoch, int64_t updates,
                                  EpochStats& stats) {
  // The end of the epoch: the neighbours and rank 0 hear it, the servers drain.
  PhaseTimer t(stats.phases, Phase::wait);
  if (active())
    for (int j : neighbours_) {
      const Header done{Request::done, epoch};
      control_->send(&done, sizeof done, j, tags::kGossipHeader);
    }
  Count final{epoch, updates, 1};
  control_->send(&final, sizeof final, 0, tags::kGossipCount);
  for (auto& [c, request] : traffic.counts) request->wait();
  if (traffic.serving.valid()) traffic.serving.get();
  if (traffic.stop_message) traffic.stop_message->wait();
  {
    std::lock_guard lock(model_mutex_);  // the differences that arrived after the last update
    apply_pending();
    host_->download();
  }
  // Once an epoch (not an iteration): no message of the next epoch can reach a server or a
  // tally still busy with this one.
  control_->barrier();
}

EpochStats GossipScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  // This part ends once the ranks' updates reach the epoch's N/M, or each rank has done
  // `part.count` of its own (the trainer gives each rank its share of a part: own_share).
  target_ = std::max<int64_t>(ctx_.iterations_per_epoch - part.first, 1);
  EpochStats stats;
  const auto epoch_start = Clock::now();
  const int p = ctx_.comm.size();
  stop_ = false;
  EpochTraffic traffic;
  if (p > 1) open_epoch(traffic, epoch);
  auto stopped = [&] {
    if (p == 1) return stop_signal() != 0;
    return ctx_.comm.rank() == 0 ? stop_.load() : traffic.stop_message->test();
  };
  int64_t updates = 0;
  Batch batch;
  try {
    for (int64_t i = part.first; part.includes(i); ++i) {
      if (stopped() || !next_batch(loader, epoch, batch, stats)) break;
      std::future<void> averaging;
      if (p > 1 && active()) averaging = exchanges_.submit([this] { exchange(); });
      // At the model as read: the exchange may change it meanwhile.
      compute_gradients(batch, stats);
      if (averaging.valid()) {
        PhaseTimer t(stats.phases, Phase::wait);
        averaging.get();
      }
      update(lr_at(epoch, part.first + updates * p), stats);
      ++updates;
      if (p > 1) report_count(traffic, epoch, updates);
      finish_iteration(epoch, i, batch.rows(), stats);
    }
  } catch (...) {
    abandon_epoch(traffic);
    throw;
  }
  if (p > 1) close_epoch(traffic, epoch, updates, stats);
  stats.wall_s = seconds_since(epoch_start);
  // Active: its exchanges; passive: the answers (not the server's epoch-long wait for requests).
  stats.phases[Phase::comm] = exchanges_.take_busy_seconds() + answer_s_;
  answer_s_ = 0;
  server_.take_busy_seconds();
  return stats;
}

int64_t GossipScheduler::own_share(int64_t count) const {
  const int p = ctx_.comm.size();
  return count > 0 ? (count + p - 1) / p : count;
}

int64_t GossipScheduler::iterations_advanced(int64_t done) {
  std::vector<double> sum{static_cast<double>(done)};
  ctx_.comm.allreduce_sum(sum);
  return static_cast<int64_t>(sum[0]);
}

void GossipScheduler::seek(Loader& loader, int epoch, int64_t first) {
  if (first == 0) passes_ = 0, consumed_ = 0;  // else: load() restored where this rank was
  loader.start_epoch(epoch + 100000 * passes_);
  Batch skipped;
  for (int64_t b = 0; b < consumed_ && loader.next(skipped); ++b) {
  }
}

void GossipScheduler::save(SchedulerState& state) {
  Scheduler::save(state);  // between parts: nothing pending, no exchange in flight
  state.set_counter("gossip.passes", passes_);
  state.set_counter("gossip.consumed", consumed_);
  std::ostringstream rng;
  rng << rng_;
  state.set_text("gossip.rng", rng.str());
}

void GossipScheduler::load(const SchedulerState& state) {
  Scheduler::load(state);
  passes_ = static_cast<int>(state.counter("gossip.passes"));
  consumed_ = state.counter("gossip.consumed");
  std::istringstream rng(state.text("gossip.rng"));
  rng >> rng_;
  std::lock_guard lock(model_mutex_);
  if (host_) host_->download();
}

EvalResult GossipScheduler::evaluate(Loader& test) {
  return on_mean_model(averager_.get(), [&] { return evaluate_model(test); });
}

}  // namespace dtrain
