// AD-PSGD's row of the registry (gossip_algorithm.h).
#include "sched/gossip/gossip_algorithm.h"

#include "sched/algorithm.h"                // AlgorithmEntry
#include "sched/gossip/gossip_scheduler.h"  // GossipScheduler
#include "sched/gossip/gossip_timing.h"     // predict_gossip
#include "sched/gossip/topology.h"          // topology_named

namespace dtrain {

AlgorithmEntry gossip_algorithm() {
  using namespace config;
  auto keys = Schema<GossipOptions>("gossip").key("topology", &GossipOptions::topology,
                                                  choice({"ring", "exponential"}),
                                                  "neighbours: i ± 1, or hops {1} ∪ {2^k + 1}");
  return {.name = "gossip",
          .summary =
              "AD-PSGD (Lian et al., ICML 2018): each rank averages its model with one "
              "random neighbour per update, asynchronously, no global barrier",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<GossipScheduler, GossipOptions>(),
          .predict =
              [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
                return predict_gossip(in, codec, topology_named(a.get<GossipOptions>().topology));
              },
          .compressions = {"none"},
          .own_data_stream = true,
          .equivalence = Equivalence::decentralized};
}

}  // namespace dtrain
