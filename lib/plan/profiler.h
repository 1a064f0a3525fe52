// Profiler: measures, on this machine and in one process, the inputs of the timing model that
// are not configured — the model's forward, backward and update times (l_for, l_back, l_up) on
// the real data path, the codecs' per-element cost, γ, the host copy speed, the timer overshoot
// of the emulated link's sleeps and the comm thread's hand-off S. Times are medians (what a
// typical step or call costs, robust to a few another process delayed; timing.csv reports
// sums); the whole profile of a small model takes well under a second.
#pragma once
#include <cstdint>  // int64_t
#include <string>
#include <vector>

#include "data/loader.h"              // Loader: the batches, as training gets them
#include "nn/model.h"                 // Model
#include "optim/optimizer.h"          // Optimizer: the update step
#include "optim/weight_prediction.h"  // WeightPrediction: SAPipe's passes
#include "plan/stale_layers.h"        // LayerCost
#include "plan/timing_model.h"        // CodecCost

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
  // With `time_layers`: each trainable parameterised layer's mean forward and backward time
  // (plan/layer_timer.h; comm_s left 0), from every other timed iteration.
  std::vector<LayerCost> layers;
};

// Trains `model` on the loader's batches (restarting its epoch when it runs out) for `warmup` +
// `iterations` steps, scaling the loss as one of `world` ranks does. Big models stop early: after
// `budget_s` seconds, once 3 steps were timed. The optimizer steps with a small learning rate:
// only its cost matters. With `time_layers`, every other timed step is timed layer by layer
// instead (ComputeTimes::layers; on an asynchronous backend each mark synchronises, so those
// steps stay out of the phase means): one profile serves both, in about the time of one.
ComputeTimes profile_compute(Model& model, Optimizer& optimizer, Loader& loader, int world,
                             int warmup, int iterations, double budget_s = 2.0,
                             bool time_layers = false);

// SAPipe's passes over its stale prefix (TimingInputs::l_step_dot ...), each timed over the whole
// trainable range with `optimizer`, right after a forward and backward as in training (the
// buffers as cold as there); medians of `reps` after one untimed round. Zeros where the optimizer
// cannot predict its step (Optimizer::prediction: SAPipe then runs none of them).
struct UpdatePasses {
  double step_dot_s = 0, predict_sum_s = 0, step_predict_s = 0, step_delta_s = 0, predict_s = 0;
};
UpdatePasses profile_update_passes(Model& model, Optimizer& optimizer, Loader& loader, int world,
                                   int reps);

// E[max of p independent draws] − mean, for draws from the empirical distribution `samples`.
double expected_max_excess(std::vector<double> samples, int p);

struct TransportTimes {
  double copy_s_per_byte = 0;   // memcpy of a block: what a shared-memory transfer costs
  double gamma_s_per_byte = 0;  // γ: out += in over f32 blocks, per byte of one block
  double handoff_s = 0;         // one-way hand-off between two cores (shared-memory latency)
  // A sleep of d seconds returns after d + overshoot_s + overshoot_per_s · d.
  double overshoot_s = 0, overshoot_per_s = 0;
  double sync_s = 0;  // S: an idle CommThread woken with a request, and the caller woken back
  // How long a thread that polls with sched_yield (MPI's wait with mpi_yield_when_idle, on a
  // comm thread) takes to see a message when a busy thread shares its core: the busy thread
  // keeps the core for the rest of its time slice.
  double yield_wait_s = 0;
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
