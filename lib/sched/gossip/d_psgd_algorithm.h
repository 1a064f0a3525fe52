// D-PSGD's keys and its registry row (d_psgd_algorithm.cpp). The scheduler is
// d_psgd_scheduler.h, the timing row d_psgd_timing.h.
#pragma once
#include <string>

namespace dtrain {

struct AlgorithmEntry;  // sched/algorithm.h

struct DPsgdOptions {
  std::string topology = "ring";  // ring | exponential | complete
};

AlgorithmEntry d_psgd_algorithm();

}  // namespace dtrain
