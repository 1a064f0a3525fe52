// D-PSGD's row of the registry (d_psgd_algorithm.h).
#include "sched/gossip/d_psgd_algorithm.h"

#include "sched/algorithm.h"                // AlgorithmEntry
#include "sched/gossip/d_psgd_scheduler.h"  // DPsgdScheduler
#include "sched/gossip/d_psgd_timing.h"     // predict_d_psgd
#include "sched/gossip/topology.h"          // topology_named

namespace dtrain {

AlgorithmEntry d_psgd_algorithm() {
  using namespace config;
  auto keys = Schema<DPsgdOptions>("d_psgd").key("topology", &DPsgdOptions::topology,
                                                 choice({"ring", "exponential", "complete"}),
                                                 "the neighbours each rank averages with");
  return {.name = "d_psgd",
          .summary =
              "D-PSGD (Lian et al., 2017): each iteration every rank averages its model with "
              "its neighbours' (uniform weights) and steps with its own gradient",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<DPsgdScheduler, DPsgdOptions>(),
          .predict =
              [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
                return predict_d_psgd(in, codec, topology_named(a.get<DPsgdOptions>().topology));
              },
          .compressions = {"none"},
          .equivalence = Equivalence::decentralized};
}

}  // namespace dtrain
