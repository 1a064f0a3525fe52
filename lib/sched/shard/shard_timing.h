// What algorithm.shard changes in an iteration's timing row (docs/planning.md): the bytes on the
// wire. ZeRO-1 and ZeRO-2 reduce-scatter the gradients and all-gather the updated weights — the
// two halves of the ring all-reduce, the same bytes; ZeRO-3 all-gathers the weights before
// forward and again before backward and reduce-scatters the gradients: 1.5 times the bytes.
#pragma once
#include <cmath>  // llround

#include "plan/timing_model.h"       // TimingInputs
#include "sched/shard/shard_mode.h"  // ShardMode

namespace dtrain {

inline double shard_traffic(ShardMode mode) {
  return mode == ShardMode::parameters ? 1.5 : 1.0;
}

// `in` with the elements an iteration communicates scaled by shard_traffic: a data-parallel
// row predicted on it is the sharded run's (the rows use `n` for their communication only).
inline TimingInputs sharded_timing_inputs(TimingInputs in, ShardMode mode) {
  in.n = std::llround(static_cast<double>(in.n) * shard_traffic(mode));
  return in;
}

}  // namespace dtrain
