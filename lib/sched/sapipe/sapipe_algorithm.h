// SAPipe's keys, what its `stale_layers: auto` shares with its timing row, and its registry row
// (sapipe_algorithm.cpp). The scheduler is sapipe_scheduler.h, the timing row sapipe_timing.h.
#pragma once
#include <cstdint>  // int64_t
#include <string>

#include "config/kinds.h"  // WordOr

namespace dtrain {

struct AlgorithmEntry;  // sched/algorithm.h

// SAPipe's keys (docs/architecture.md §3).
struct SapipeOptions {
  config::WordOr<int> stale_layers = config::WordOr<int>::named("auto");  // auto | all | N
  std::string compensation = "wp3";  // none | dc | wp1 | wp2 | wp3
  double dc_lambda = 0.2;
  std::string dc_form = "outer";  // outer (the paper's Eq. 1) | diag (DC-ASGD)
  int segments = 1;               // of the fresh layers' gradient
  int warmup_epochs = 0;          // epochs of D-Sync first
};

// `stale_layers: auto`'s check of its choice, which the scheduler runs and the plan's row
// simulates: a hook that waits more than kTolerableWait of the iteration makes k grow, at most
// kMaxAutoChecks times.
namespace sapipe_auto {
inline constexpr int kMaxAutoChecks = 4;
inline constexpr double kTolerableWait = 0.03;
// Floats of the all-reduce that measures what any all-reduce costs (latency, hand-offs).
inline constexpr int64_t kSmallAllreduce = 1024;
}  // namespace sapipe_auto

AlgorithmEntry sapipe_algorithm();

}  // namespace dtrain
