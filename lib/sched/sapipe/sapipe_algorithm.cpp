// SAPipe's row of the registry (sapipe_algorithm.h).
#include "sched/sapipe/sapipe_algorithm.h"

#include "sched/algorithm.h"                // AlgorithmEntry
#include "sched/sapipe/sapipe_scheduler.h"  // SapipeScheduler
#include "sched/sapipe/sapipe_timing.h"     // predict_sapipe

namespace dtrain {

AlgorithmEntry sapipe_algorithm() {
  using namespace config;
  auto keys =
      Schema<SapipeOptions>("sapipe")
          .key("stale_layers", &SapipeOptions::stale_layers,
               word_or({"auto", "all"}, integer(Bounds::at_least(0))),
               "the first k parameterised layers use the gradient of t − 2 (auto: the least k "
               "that hides the communication, from a profile of the first iterations)")
          .key("compensation", &SapipeOptions::compensation,
               choice({"none", "dc", "wp1", "wp2", "wp3"}),
               "staleness compensation: delay compensation, or weight prediction with the own "
               "gradient (wp1), the latest all-reduced one (wp2) or both with DC (wp3)")
          .key("dc_lambda", &SapipeOptions::dc_lambda, real(Bounds::at_least(0)),
               "delay compensation's λ")
          .key("dc_form", &SapipeOptions::dc_form, choice({"outer", "diag"}),
               "delay compensation's Hessian approximation: λ(gᵀΔ)g (outer) or λ·g⊙g⊙Δ (diag)")
          .key("segments", &SapipeOptions::segments, integer(Bounds::at_least(1)),
               "segments of the fresh layers' gradient, each all-reduced as soon as final")
          .key("warmup_epochs", &SapipeOptions::warmup_epochs, integer(Bounds::at_least(0)),
               "epochs of D-Sync first");
  return {.name = "sapipe",
          .summary =
              "SAPipe (Chen et al., NeurIPS 2022): Pipe-SGD with staleness only in the "
              "first layers, delay compensation and weight prediction",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<SapipeScheduler, SapipeOptions>(),
          .predict =
              [](const TimingInputs& in, const CodecCost& codec, const AlgorithmConfig& a) {
                return predict_sapipe(in, codec, a.get<SapipeOptions>());
              },
          .equivalence = Equivalence::stale};
}

}  // namespace dtrain
