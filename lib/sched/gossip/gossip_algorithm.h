// AD-PSGD's keys (`gossip`) and its registry row (gossip_algorithm.cpp). The scheduler is
// gossip_scheduler.h, the timing row gossip_timing.h.
#pragma once
#include <string>

namespace dtrain {

struct AlgorithmEntry;  // sched/algorithm.h

struct GossipOptions {
  std::string topology = "ring";  // ring | exponential
};

AlgorithmEntry gossip_algorithm();

}  // namespace dtrain
