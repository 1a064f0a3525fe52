#include "sched/gossip/gossip_timing.h"

#include <algorithm>  // min, max
#include <cmath>      // ceil: the epoch's drain
#include <vector>

namespace dtrain {

namespace {

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

// AD-PSGD as its scheduler runs it, with m = 4n bytes of model (not in the Pipe-SGD paper).
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

}  // namespace dtrain
