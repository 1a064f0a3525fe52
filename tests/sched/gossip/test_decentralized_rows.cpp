// The decentralized algorithms' timing rows (gossip, d_psgd) and stragglers in the rows, against
// hand-computed numbers. four_ranks(): l_for 1 ms, l_back 2 ms, l_up 0.5 ms, a 10 us, 1 ns/B
// link without copies, γ = 0.5 ns/B, S = 20 us, a core for every thread unless a case says not.
#include <doctest/doctest.h>

#include <cmath>  // sqrt, ceil

#include "../../plan/timing_fixtures.h"  // four_ranks, none, kCommNone
#include "sched/gossip/d_psgd_timing.h"  // predict_d_psgd
#include "sched/gossip/gossip_timing.h"  // predict_gossip
#include "sched/sync_timing.h"           // predict_sync

using namespace dtrain;
using namespace dtrain::test;

namespace {

// 100k floats: a 0.4 MB model, whose exchanges hide behind the 3 ms of forward and backward.
TimingInputs small_model() {
  TimingInputs in = four_ranks();
  in.n = 100'000;
  return in;
}

// Global batches per second of ranks taking t[rank] seconds per update, each on 1/4 of it.
double harmonic_iteration(std::initializer_list<double> t) {
  double rate = 0;
  for (double s : t) rate += 1 / (4 * s);
  return 1 / rate;
}

// An active rank of four on a ring picks one of its two passive neighbours, which the other
// active rank (update time t) keeps busy for E/(2t) of the time, each of the two: it waits
// q = (E/t)·E/4, half an exchange when taken. With its own update b + q (b without the wait)
// and the other's the same, q(b + q) = E²/4.
double queued(double b, double exchange) {
  return (-b + std::sqrt(b * b + exchange * exchange)) / 2;
}

}  // namespace

TEST_CASE("gossip, compute-bound: every rank's update is its own compute and the merge") {
  const Prediction r = predict_gossip(small_model(), none());
  // Exchange: S + 2 messages of 0.4 MB (10 us + 0.4 ms each) + 3 sums of 0.4 MB at 0.5 ns/B.
  const double exchange = 20e-6 + 2 * (10e-6 + 0.4e-3) + 3 * 0.2e-3;
  CHECK(r.comm_s == doctest::Approx(exchange));
  // Forward + backward (3 ms) hide it and a busy peer's wait (0.14 ms); then pending is added
  // (0.2 ms; zeroing it: a copy, 0 here) and the step (0.5 ms).
  CHECK(r.iteration_s == doctest::Approx(3e-3 + 0.2e-3 + 0.5e-3));
  CHECK(r.compute_s == doctest::Approx(3.7e-3));  // a passive rank's update
  CHECK(r.compute_bound);
  CHECK(r.samples_per_s == doctest::Approx(128 / 3.7e-3));
}

TEST_CASE("gossip, communication-bound: the active ranks wait for their exchange, not for all") {
  const Prediction r = predict_gossip(four_ranks(), none());
  // Two messages of 4 MB (10 us + 4 ms each), three sums of 4 MB (2 ms each), and S.
  const double exchange = 20e-6 + 2 * 4.01e-3 + 3 * 2e-3;
  CHECK(r.comm_s == doctest::Approx(exchange));
  CHECK_FALSE(r.compute_bound);
  const double passive = 3e-3 + 2e-3 + 0.5e-3;  // its server answers on its own
  // Forward + backward (3 ms) hide 3 ms of the exchange; the rest, and the wait for a peer
  // busy with the other active rank, is idle; then it merges (2 ms) and steps (0.5 ms).
  const double b = passive + exchange - 3e-3;
  const double active = b + queued(b, exchange);
  CHECK(r.iteration_s == doctest::Approx(harmonic_iteration({passive, active, passive, active})));
  CHECK(r.samples_per_s == doctest::Approx(128 / r.iteration_s));
}

TEST_CASE("gossip on shared cores: the active rank's exchange follows its forward and backward") {
  // Ranks x (threads + 1) > cores: the exchange thread, woken while the compute threads hold
  // the cores, runs once its rank's compute thread waits.
  TimingInputs in = small_model();
  in.comm_shares_core = true;
  const Prediction r = predict_gossip(in, none());
  const double exchange = 20e-6 + 2 * (10e-6 + 0.4e-3) + 3 * 0.2e-3;  // 1.44 ms
  const double passive = 3.7e-3, b = passive + exchange;
  const double active = b + queued(b, exchange);
  CHECK(r.iteration_s == doctest::Approx(harmonic_iteration({passive, active, passive, active})));
  CHECK(r.iteration_s > predict_gossip(small_model(), none()).iteration_s);
  // The two comm threads meet in MPI waits beside a passive rank's computing thread: three
  // hand-offs on the exchange's path, each half a round trip with a poller that waits for a
  // time slice (here a 2 ms round trip: 1 ms a hand-off).
  in.yield_wait_s = 2e-3;
  const Prediction late = predict_gossip(in, none());
  CHECK(late.comm_s == doctest::Approx(exchange + 3e-3));
  const double b_late = passive + exchange + 3e-3;
  const double active_late = b_late + queued(b_late, exchange + 3e-3);
  CHECK(late.iteration_s ==
        doctest::Approx(harmonic_iteration({passive, active_late, passive, active_late})));
  // With a core for every thread nothing waits for a slice.
  TimingInputs roomy = small_model();
  roomy.yield_wait_s = 2e-3;
  CHECK(predict_gossip(roomy, none()).comm_s == doctest::Approx(exchange));
}

TEST_CASE("gossip shares the cores among the threads that are busy, not among all ranks") {
  // Four ranks on two cores: the profile stretched l_for, l_back and l_up by 4/2.
  TimingInputs in = four_ranks();
  in.cores = 2;
  in.crowding = 2;
  in.comm_shares_core = true;
  in.l_for *= 2, in.l_back *= 2, in.l_up *= 2;
  // The active ranks wait for their 14.04 ms exchanges most of the time (their MPI waits yield
  // the cores): busy are the two passive ranks' compute, the active ones' while it runs and the
  // exchanges' CPU work (4 sums of 4 MB, 8 ms; the copies are 0 here). With the stretch c:
  // updates of 3.5c + 2 ms (the merge: a sum), an active one's b + q after its exchange, and
  // c = (2 + 2 (3.5c + 2 + 8) / t_active) / 2.
  const Prediction r = predict_gossip(in, none());
  const double exchange = 20e-6 + 2 * 4.01e-3 + 3 * 2e-3;
  const double c = (r.compute_s - 2e-3) / 3.5e-3;
  const double b = 3.5e-3 * c + 2e-3 + exchange, active = b + queued(b, exchange);
  CHECK(c > 1.0);
  CHECK(c < 2.0);
  CHECK(c == doctest::Approx(1 + (3.5e-3 * c + 10e-3) / active).epsilon(1e-6));
  const double passive = r.compute_s;
  CHECK(r.iteration_s == doctest::Approx(harmonic_iteration({passive, active, passive, active})));
  // Every rank computing all the time (a tiny model: 54 us exchanges behind its compute), plus
  // the exchanges' 8 us of sums: the profile's stretch, a little more.
  TimingInputs tiny = in;
  tiny.n = 1000;
  tiny.comm_shares_core = false;
  const double stretch = (predict_gossip(tiny, none()).compute_s - 2e-6) / 3.5e-3;
  CHECK(stretch > 2.0);
  CHECK(stretch == doctest::Approx(2.0).epsilon(0.01));
}

TEST_CASE("gossip with a straggler: only its own updates slow down") {
  TimingInputs in = small_model();
  in.rank_slowdown = {1, 3};  // rank 1: forward and backward take 9 ms
  const Prediction r = predict_gossip(in, none());
  const double others = 3.7e-3, straggler = 9e-3 + 0.7e-3;
  CHECK(r.iteration_s == doctest::Approx(harmonic_iteration({others, straggler, others, others})));
  // sync waits for it every iteration: 0.5 ms + 9 ms, then the all-reduce.
  const Prediction sync = predict_sync(in, none());
  CHECK(sync.compute_s == doctest::Approx(0.5e-3 + 9e-3));
  CHECK(r.samples_per_s > 1.5 * sync.samples_per_s);

  // An active straggler whose compute hides behind its exchange costs nothing.
  TimingInputs busy = four_ranks();
  const double unslowed = predict_gossip(busy, none()).iteration_s;
  busy.rank_slowdown = {1, 3};  // 9 ms < the 14.04 ms exchange
  CHECK(predict_gossip(busy, none()).iteration_s == doctest::Approx(unslowed));
}

TEST_CASE("gossip: the epoch's end drains the exchange in flight") {
  // Two ranks, a 4 MB model: the exchange (S + 2 messages of 4.01 ms + 3 sums of 2 ms = 14.04
  // ms) outlasts forward and backward (3 ms). Passive rank 0 updates in 3 + 0.5 + 2 (its merge)
  // = 5.5 ms, active rank 1 in 5.5 + 14.04 - 3 = 16.54 ms.
  TimingInputs in = four_ranks();
  in.p = 2;
  const double passive = 5.5e-3, active = 16.54e-3, exchange = 14.04e-3;
  const double rate = 1 / passive + 1 / active;  // updates per second, both ranks
  CHECK(predict_gossip(in, none()).iteration_s == doctest::Approx(2 / rate));
  // With 100 updates an epoch: rank 0 answers exchange/active of the time; that often its count
  // of the 100th update waits for the end of the exchange in progress (the active rank's
  // updates run from the epoch's start: the next multiple of 16.54 ms), then the active rank's
  // update runs (it has started its next one if rank 0 was answering it, else it is half-way).
  in.epoch_iterations = 100;
  const double answering = exchange / active;
  const double reached = 100 / rate;
  const double counted = answering * (std::ceil(reached / active) * active - reached);
  const double drain = answering * active + (1 - answering) * active / 2;
  const double wall = reached + counted + drain;
  const double made = 100 + rate * counted + 0.5;
  CHECK(predict_gossip(in, none()).iteration_s == doctest::Approx(2 * wall / made));
  // A long epoch: the drain hardly shows.
  in.epoch_iterations = 1'000'000;
  CHECK(predict_gossip(in, none()).iteration_s == doctest::Approx(2 / rate).epsilon(1e-3));
}

TEST_CASE("d_psgd on a ring: two neighbours' messages every iteration, then the mix") {
  // Compute-bound: S + 2 messages of 0.4 MB hide behind 3 ms; mixing two models is 2 sums.
  const Prediction fast = predict_d_psgd(small_model(), none(), Topology::ring);
  CHECK(fast.comm_s == doctest::Approx(20e-6 + 2 * 0.41e-3));
  CHECK(fast.compute_bound);
  CHECK(fast.iteration_s == doctest::Approx(3.5e-3 + 2 * 0.2e-3));
  // Communication-bound: 8.04 ms of exchange against 3 ms of forward and backward.
  const Prediction slow = predict_d_psgd(four_ranks(), none(), Topology::ring);
  const double exchange = 20e-6 + 2 * 4.01e-3;
  CHECK(slow.comm_s == doctest::Approx(exchange));
  CHECK_FALSE(slow.compute_bound);
  CHECK(slow.iteration_s == doctest::Approx(0.5e-3 + exchange + 2 * 2e-3));
  CHECK(slow.samples_per_s == doctest::Approx(128 / slow.iteration_s));
  // On shared cores only the exchange's CPU work (S here: the link has no copies) competes
  // with forward and backward; its 0.82 ms of paced sleep still hides behind them.
  TimingInputs shared = small_model();
  shared.comm_shares_core = true;
  CHECK(predict_d_psgd(shared, none(), Topology::ring).iteration_s ==
        doctest::Approx(3.5e-3 + 20e-6 + 2 * 0.2e-3));
  // Compute threads time-sliced two to a core (the profile's compute already stretched): the
  // last neighbour meets 2 slices of 0.5 ms late, still within forward and backward; the comm
  // thread's CPU work (S) shares the crowded core too and takes twice as long.
  shared.crowding = 2;
  shared.yield_wait_s = 0.5e-3;
  CHECK(predict_d_psgd(shared, none(), Topology::ring).iteration_s ==
        doctest::Approx(3.5e-3 + 2 * 20e-6 + 2 * 0.2e-3));
  // A 4 MB model on shared cores: the core computes 3 ms + S; the exchange, 8.04 ms of sleep
  // and S, ends later by the part of S time-sliced with the compute (S · 3/8.04): the compute
  // thread idles from 3.02 ms until then.
  TimingInputs big = four_ranks();
  big.comm_shares_core = true;
  const double exchange_end = 8.04e-3 + 20e-6 * 3.0 / 8.04;
  CHECK(predict_d_psgd(big, none(), Topology::ring).iteration_s ==
        doctest::Approx(3.5e-3 + 20e-6 + (exchange_end - 3.02e-3) + 2 * 2e-3));
}

TEST_CASE("d_psgd: other topologies") {
  // Exponential on 8 ranks: hops 1, 3, 5: neighbours i ± 1, i ± 3 (i ± 5 is i ∓ 3), so 4.
  TimingInputs eight = small_model();
  eight.p = 8;
  const Prediction e = predict_d_psgd(eight, none(), Topology::exponential);
  CHECK(e.comm_s == doctest::Approx(20e-6 + 4 * 0.41e-3));
  CHECK(e.iteration_s == doctest::Approx(3.5e-3 + 4 * 0.2e-3));
  // Complete: the model all-reduced (Eq. 5 with S) while forward and backward run.
  const Prediction c = predict_d_psgd(four_ranks(), none(), Topology::complete);
  CHECK(c.comm_s == doctest::Approx(kCommNone));
  CHECK(c.iteration_s == doctest::Approx(0.5e-3 + kCommNone));
}

TEST_CASE("d_psgd with a straggler: its pace propagates to every rank") {
  TimingInputs in = small_model();
  in.rank_slowdown = {1, 1, 3};  // rank 2, not a neighbour of rank 0: it still sets the pace
  const Prediction r = predict_d_psgd(in, none(), Topology::ring);
  CHECK(r.iteration_s == doctest::Approx(0.5e-3 + 9e-3 + 2 * 0.2e-3));
  // Now its compute hides the 8.04 ms exchange of a 4 MB model.
  TimingInputs big = four_ranks();
  big.rank_slowdown = {1, 1, 3};
  CHECK(predict_d_psgd(big, none(), Topology::ring).iteration_s ==
        doctest::Approx(0.5e-3 + 9e-3 + 2 * 2e-3));
}

TEST_CASE("sync with a straggler runs at its pace; a straggler the job lacks changes nothing") {
  TimingInputs in = four_ranks();
  in.rank_slowdown = {1, 1, 2};  // rank 2: forward and backward take 6 ms
  const Prediction r = predict_sync(in, none());
  CHECK(r.compute_s == doctest::Approx(0.5e-3 + 6e-3));
  CHECK(r.iteration_s == doctest::Approx(6.5e-3 + kCommNone));
  in.rank_slowdown = {1, 1, 1, 1, 5};  // rank 4 of 4 ranks
  CHECK(predict_sync(in, none()).iteration_s == doctest::Approx(3.5e-3 + kCommNone));
}
