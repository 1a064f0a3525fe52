// Profiler: measures, on this machine and in one process, the inputs of the timing model that
// are not configured — the model's forward, backward and update times (l_for, l_back, l_up),
// the codecs' per-element cost, γ, the host copy speed, the emulated link's timer overshoot and
// the comm thread's hand-off S. Each figure is the median of a few repetitions, so a short
// profile (a second or two) is steady enough on a busy machine.
#pragma once
#include <cstdint>  // int64_t
#include <string>
#include <vector>

#include "nn/model.h"           // Model, ModelInput
#include "optim/sgd.h"          // Sgd: the update step
#include "plan/timing_model.h"  // CodecCost

namespace dtrain {

struct ComputeTimes {
  double forward_s = 0, backward_s = 0, update_s = 0;  // medians, one iteration each
  int iterations = 0;                                  // timed (after the warm-up)
};

// Trains `model` (built for input.batch samples) on random images and labels of its input shape
// for `warmup` + `iterations` steps, scaling the loss as a rank of `world` does, and returns the
// median time of each phase. Big models stop early: after `budget_s` seconds, once 3 steps were
// timed. The optimizer steps with a small learning rate: only its cost matters, and it keeps
// the weights finite on random data.
ComputeTimes profile_compute(Model& model, Sgd& optimizer, const ModelInput& input, int world,
                             int warmup, int iterations, double budget_s = 2.0);

struct TransportTimes {
  double copy_s_per_byte = 0;    // memcpy of a block: what a shared-memory transfer costs
  double gamma_s_per_byte = 0;   // γ: out += in over f32 blocks, per byte of one block
  double handoff_s = 0;          // one-way hand-off between two cores (shared-memory latency)
  double sleep_overshoot_s = 0;  // how much later than asked a short sleep returns
  double sync_s = 0;             // S: an empty request through a CommThread and back
};

// Measures the transport figures on blocks of `block_elements` floats (the ring's n/p).
TransportTimes profile_transport(int64_t block_elements);

// Measures encode, decode and decode_add of the codec `name` on random gradient-like blocks of
// `block_elements` floats; per element.
CodecCost profile_codec(const std::string& name, int64_t block_elements);

}  // namespace dtrain
