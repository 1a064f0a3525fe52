// HPSGD's keys and its registry row (hpsgd_algorithm.cpp). The scheduler is hpsgd_scheduler.h,
// the timing row hpsgd_timing.h.
#pragma once
#include "config/kinds.h"  // WordOr

namespace dtrain {

struct AlgorithmEntry;  // sched/algorithm.h

struct HpsgdOptions {
  // auto: whenever the previous round has finished on all ranks; N: every N iterations.
  config::WordOr<int> sync_period = config::WordOr<int>::named("auto");
};

AlgorithmEntry hpsgd_algorithm();

}  // namespace dtrain
