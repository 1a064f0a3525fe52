// Profiler: measures, on this machine and in one process, the inputs of the timing model that
// are not configured — the model's forward, backward and update times (l_for, l_back, l_up) on
// the real data path, the codecs' per-element cost, γ, the host copy speed, the timer overshoot
// of the emulated link's sleeps and the comm thread's hand-off S. Times are means (timing.csv
// reports sums) except where a median says what a typical call costs; the whole profile of a
// small model takes well under a second.
#pragma once
#include <cstdint>  // int64_t
#include <string>
#include <vector>

#include "data/loader.h"        // Loader: the batches, as training gets them
#include "nn/model.h"           // Model
#include "optim/optimizer.h"    // Optimizer: the update step
#include "plan/stale_layers.h"  // LayerCost
#include "plan/timing_model.h"  // CodecCost

namespace dtrain {

struct ComputeTimes {
  double data_s = 0, forward_s = 0, backward_s = 0, update_s = 0;  // means per iteration
  // E[max over `world` ranks] − mean of one iteration's total, from the spread of the timed
  // iterations: what a synchronous step loses waiting for the slowest rank.
  double skew_s = 0;
  int iterations = 0;  // timed (after the warm-up)
  // Extra time of an iteration that starts after the core idled for `idle_s[i]` (waiting for
  // communication): caches and clocks have gone cold. Zeros when the budget did not allow.
  std::vector<double> idle_s, idle_penalty_s;
};

// Trains `model` on the loader's batches (restarting its epoch when it runs out) for `warmup` +
// `iterations` steps, scaling the loss as one of `world` ranks does. Big models stop early: after
// `budget_s` seconds, once 3 steps were timed. The optimizer steps with a small learning rate:
// only its cost matters.
ComputeTimes profile_compute(Model& model, Optimizer& optimizer, Loader& loader, int world,
                             int warmup, int iterations, double budget_s = 2.0);

// Each trainable parameterised layer's mean forward and backward time (plan/layer_timer.h) over
// `iterations` steps after one warm-up, continuing the loader's epoch; comm_s left 0.
std::vector<LayerCost> profile_layers(Model& model, Loader& loader, int world, int iterations);

// E[max of p independent draws] − mean, for draws from the empirical distribution `samples`.
double expected_max_excess(std::vector<double> samples, int p);

struct TransportTimes {
  double copy_s_per_byte = 0;   // memcpy of a block: what a shared-memory transfer costs
  double gamma_s_per_byte = 0;  // γ: out += in over f32 blocks, per byte of one block
  double handoff_s = 0;         // one-way hand-off between two cores (shared-memory latency)
  // The same between two threads polling with sched_yield (MPI waits) while every core but one
  // computes: a poller beside a computing thread waits for its time slice to end.
  double yield_handoff_s = 0;
  // A sleep of d seconds returns after d + overshoot_s + overshoot_per_s · d.
  double overshoot_s = 0, overshoot_per_s = 0;
  double sync_s = 0;  // S: an idle CommThread woken with a request, and the caller woken back
};

// Measures the transport figures on blocks of `block_elements` floats (the ring's n/p).
TransportTimes profile_transport(int64_t block_elements);

// Measures encode, decode and decode_add of the codec `name`, per element, by running the codec
// calls of one rank's ring all-reduce of an `elements`-float gradient over `ranks` ranks — same
// blocks, same order, same buffers — with each transfer replaced by a local copy, so that the
// caches are as warm or cold as in training.
CodecCost profile_codec(const std::string& name, int64_t elements, int ranks);

// Cores this process may run on (its affinity mask).
int available_cores();

}  // namespace dtrain
