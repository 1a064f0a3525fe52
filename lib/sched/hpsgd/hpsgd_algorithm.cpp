// HPSGD's row of the registry (hpsgd_algorithm.h).
#include "sched/hpsgd/hpsgd_algorithm.h"

#include "sched/algorithm.h"              // AlgorithmEntry
#include "sched/hpsgd/hpsgd_scheduler.h"  // HpsgdScheduler
#include "sched/hpsgd/hpsgd_timing.h"     // predict_hpsgd

namespace dtrain {

AlgorithmEntry hpsgd_algorithm() {
  using namespace config;
  auto keys = Schema<HpsgdOptions>("hpsgd").key(
      "sync_period", &HpsgdOptions::sync_period, word_or({"auto"}, integer(Bounds::at_least(1))),
      "iterations between synchronisations (auto: as soon as the previous one finished on every "
      "rank)");
  return {.name = "hpsgd",
          .summary =
              "HPSGD (Zhou et al.): gradients all-reduced in parallel with local training on "
              "a replica, each merged into the global model exactly once",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<HpsgdScheduler, HpsgdOptions>(),
          .predict =
              [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
                const auto& period = a.get<HpsgdOptions>().sync_period;
                return predict_hpsgd(in, codec, period.is("auto") ? 0 : period.value);
              },
          .equivalence = Equivalence::local};
}

}  // namespace dtrain
