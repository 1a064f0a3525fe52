#include "sched/gossip/gossip_scheduler.h"

#include <algorithm>  // min, max: a part's target
#include <chrono>
#include <cmath>  // ceil: the epoch's drain
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

// The epoch's end, which a steady state leaves out (not in the paper). Rank 0 ends an epoch once
// the ranks' updates reach `updates` (the epoch's iterations), counting them on its server
// thread, which also answers exchanges. So
//  - the count waits for the exchange rank 0 is answering, as often as it answers one (the
//    fraction `answering` of the time): the epoch starts at a barrier, so the active ranks'
//    exchanges start together and one update apart, and the one in progress when the ranks
//    reach `updates` ends at the next multiple of an active update (deterministic, not half
//    an exchange on average: with 100-update epochs on a slow link it is the first exchange);
//  - the active ranks then finish the update they are in: the one rank 0 was answering has
//    already started its next (the end reaches it after it did), the others are a random part
//    of the way through theirs (the latest of n of them: n/(n + 1) of an update);
//  - the passive ranks stop once they hear the end (their updates go on meanwhile) and wait.
// timing.csv's wall time over the updates of all ranks includes it: with 100-update epochs on a
// slow link it is much of an epoch (the MLP at 100 Mbit/s on 2 ranks: its 0.42 s exchanges
// against 1.9 ms passive updates). `t`: each rank's update time (odd ranks active).
double iteration_with_epoch_drain(const std::vector<double>& t, double answering, int64_t updates) {
  const int p = static_cast<int>(t.size());
  double rate = 0, slowest_active = 0;
  int active = 0;
  for (int r = 0; r < p; ++r) {
    rate += 1 / t[static_cast<size_t>(r)];
    if (r % 2 == 1) slowest_active = std::max(slowest_active, t[static_cast<size_t>(r)]), ++active;
  }
  const double reached = static_cast<double>(updates) / rate;
  const double exchange_end = std::ceil(reached / slowest_active) * slowest_active;
  const double counted = answering * (exchange_end - reached);
  const double drain =
      answering * slowest_active + (1 - answering) * slowest_active * active / (active + 1.0);
  const double wall = reached + counted + drain;
  // The updates made: the target, those while the count waited, and about half an update of
  // each active rank's last one not yet in the rate.
  const double made = static_cast<double>(updates) + rate * counted + active / 2.0;
  return p * wall / made;
}

}  // namespace

// AD-PSGD as this scheduler runs it, with m = 4n bytes of model (not in the Pipe-SGD paper).
//  An active (odd) rank hands one exchange to its comm thread (S) and computes meanwhile; the
//    exchange sums its snapshot (x + pending: γ·m), sends the model (one message of m bytes),
//    waits while the peer's server sums its own snapshot (γ·m) and sends it back (another
//    message), and adds the difference to pending (γ·m). The compute thread waits for the
//    exchange, then adds pending to the model and zeroes it (γ·m + m written) and steps (l_up),
//    cold after idling.
//  A passive (even) rank never waits: its server answers on a thread of its own, and every
//    update adds its pending differences (most often none) and zeroes them all the same.
// When the comm threads have no cores of their own, three things follow from the passive ranks'
// compute threads never stopping:
//  - the active rank's exchange thread, woken while its own compute thread holds its core, runs
//    once forward + backward end: the exchange follows them instead of hiding behind them;
//  - the two comm threads meet in MPI waits (which poll, yielding the core) on the cores a
//    passive rank computes on: a hand-off between them costs half of yield_wait_s on average
//    (the poller behind the passive rank's computing thread waits for its time slice to end,
//    the other one answers at once: the profile's round trip), three on the exchange's path
//    (a message of the model is a rendezvous: the server's receive sees the active rank's
//    model, the active rank's send sees it taken, the active rank's receive sees the reply);
//  - the cores are shared by the threads that are busy, not by all ranks: the passive ranks'
//    compute, the active ranks' compute while it runs, and the exchanges' CPU work (copies,
//    sums). A comm thread in an MPI wait polls with sched_yield (mpi_yield_when_idle) and gives
//    its core to any compute thread (measured: two such threads beside two computing ones on
//    two cores take nothing from them). The busy threads over the cores stretch l_for, l_back
//    and l_up (the profile's `crowding` assumed every rank computing at once).
// An active rank whose chosen passive peer is still answering another active rank waits for
// it: with the others' exchanges at random phases, that peer is busy with the fraction of the
// time they spend exchanging with it, for half an exchange on average.
// Nobody waits for the slowest rank (no l_skew): a straggler's compute (its own stretch) slows
// only its own updates, while the others go on at theirs (AD-PSGD's straggler analysis: the
// samples processed are the sum of each rank's own rate). So samples/s = Σ_ranks (B/p) / t_rank,
// and the row's iteration is the time for the ranks together to process one global batch B,
// B / samples/s (the harmonic mean of the ranks' update times), which is what the wall time of
// an epoch over its updates, summed over the ranks (timing.csv), measures; its compute is an
// unslowed passive rank's update, its comm one exchange.
// Once an epoch (in.epoch_iterations): the drain of the exchanges in flight at its end
// (iteration_with_epoch_drain).
// Left out: the control messages (headers, counts: unpaced), a GPU model's host copies, the
// server's polling for requests (at most 200 us, plus the sleep's overshoot).
Prediction predict_gossip(const TimingInputs& in, const CodecCost& codec, Topology topology) {
  if (in.p <= 1) {
    const double compute = in.l_data + (in.l_for + in.l_back) * rank_slowdown(in, 0) + in.l_up;
    return make_prediction(in, "gossip", codec, compute, 0, compute);
  }
  const int p = in.p;
  const double m = 4.0 * static_cast<double>(in.n);
  const double sum = in.gamma_s_per_byte * m;
  const CommCost message = in.link.message(m);
  const bool contended = in.comm_shares_core;
  const double exchange =
      in.sync_s + 2 * message.total() + 3 * sum + (contended ? 3 * in.yield_wait_s / 2 : 0);
  const double merge = sum + in.link.copy_s_per_byte * m;  // pending added, then zeroed
  // The CPU work of one exchange on both sides: the two transfers, the two snapshots and the
  // two differences added.
  const double exchange_cpu = 2 * message.cpu_s + 4 * sum;
  // An unslowed rank's forward + backward and step on a core of its own.
  const double crowding = std::max(in.crowding, 1.0);
  const double own_compute = (in.l_for + in.l_back) / crowding, own_step = in.l_up / crowding;
  std::vector<std::vector<int>> neighbours(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r)
    neighbours[static_cast<size_t>(r)] = topology_neighbours(topology, r, p);
  auto degree = [&](int r) {
    return static_cast<double>(neighbours[static_cast<size_t>(r)].size());
  };

  // Each rank's update time, its compute thread's busy time, and an active rank's wait for a
  // busy peer, at the cores' stretch `c`; then c from the busy threads, until they agree.
  std::vector<double> t(static_cast<size_t>(p)), busy(static_cast<size_t>(p)),
      queued(static_cast<size_t>(p), 0.0);
  double c = crowding;
  for (int round = 0; round < 50; ++round) {
    for (int r = 0; r < p; ++r) {
      const auto i = static_cast<size_t>(r);
      const double forward_backward = own_compute * c * rank_slowdown(in, r);
      const double update = own_step * c + merge;
      busy[i] = in.l_data + forward_backward + update;
      if (r % 2 == 0) {
        t[i] = busy[i];
        continue;
      }
      const double waited = exchange + queued[i];
      const double idle = contended ? waited : std::max(0.0, waited - forward_backward);
      t[i] = busy[i] + idle + idle_penalty(in, idle);
    }
    // The chance that an active rank's pick is answering another active rank, times half an
    // exchange.
    for (int r = 1; r < p; r += 2) {
      double taken = 0;
      for (int s : neighbours[static_cast<size_t>(r)])
        for (int j : neighbours[static_cast<size_t>(s)])
          if (j != r) taken += exchange / (degree(j) * t[static_cast<size_t>(j)]);
      queued[static_cast<size_t>(r)] = taken / degree(r) * exchange / 2;
    }
    if (in.cores <= 0) continue;  // the profile's stretch as it is
    double threads = 0, exchanging = 0;
    for (int r = 0; r < p; ++r) {
      const auto i = static_cast<size_t>(r);
      threads += busy[i] / t[i];
      if (r % 2 == 1) exchanging += exchange_cpu / t[i];
    }
    const double next =
        std::max(1.0, (threads * in.threads_per_rank + exchanging) / static_cast<double>(in.cores));
    c = (c + next) / 2;  // damped: the stretch and the update times move each other
  }
  double rate = 0;  // global batches per second, all ranks together
  for (int r = 0; r < p; ++r) rate += 1.0 / (p * t[static_cast<size_t>(r)]);
  double iteration = 1.0 / rate;
  if (in.epoch_iterations > 0) {
    // How much of the time rank 0's server answers an exchange: each active neighbour j picks
    // it for 1/degree(j) of its exchanges.
    double answering = 0;
    for (int j : neighbours[0])
      if (j % 2 == 1) answering += exchange / (degree(j) * t[static_cast<size_t>(j)]);
    iteration = iteration_with_epoch_drain(t, std::min(answering, 1.0), in.epoch_iterations);
  }
  const double passive = busy[0];
  Prediction r = make_prediction(in, "gossip", codec, passive, exchange, iteration);
  r.compute_bound = own_compute * c >= exchange;
  return r;
}

AlgorithmEntry gossip_algorithm() {
  using namespace config;
  auto keys = Schema<GossipOptions>("gossip").key("topology", &GossipOptions::topology,
                                                  choice({"ring", "exponential"}),
                                                  "neighbours: i ± 1, or hops {1} ∪ {2^k + 1}");
  return {.name = "gossip",
          .summary =
              "AD-PSGD (Lian et al., ICML 2018): each rank averages its model with one "
              "random neighbour per update, asynchronously, no global barrier",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<GossipScheduler, GossipOptions>(),
          .predict =
              [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
                return predict_gossip(in, codec, topology_named(a.get<GossipOptions>().topology));
              },
          .compressions = {"none"},
          .own_data_stream = true,
          // Each rank steps its own model through Optimizer::step: any optimizer.
          .optimizers = {"sgd", "adamw"},
          // Each rank clips its own gradient (the local norm) before its own step.
          .clips_gradients = true,
          .equivalence = Equivalence::decentralized};
}

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
  return evaluate_mean(averager_.get(), test);
}

}  // namespace dtrain
