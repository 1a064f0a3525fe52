// The `lion` row: Lion as an element rule (lion_rule.h).
#include "optim/lion.h"

#include "optim/lion_rule.h"
#include "optim/optimizer_table.h"  // OptimizerEntry
#include "optim/rule_optimizer.h"   // RuleOptimizer, rule_factory

namespace dtrain {
namespace {

struct LionFamily {
  using Options = LionOptions;
  using Coeffs = lion::Coeffs;
  static constexpr const char* kName = "lion";
  static constexpr bool kCountsSteps = false;
  static constexpr bool kDecoupledDecay = true;

  static void check(const Options& o) {
    DTRAIN_CHECK(o.betas.size() == 2) << "lion: betas needs two entries";
  }
  static std::vector<std::string> states(const Options&) { return {"m"}; }
  template <class Run>
  static void with_rule(const Options&, Run&& run) {
    run(lion::Rule{});
  }
  static Coeffs coeffs(const Options& o, float lr, int64_t, bool decay) {
    return lion::coeffs(lr, static_cast<float>(o.betas[0]), static_cast<float>(o.betas[1]),
                        decay ? static_cast<float>(o.weight_decay) : 0.0f);
  }
  static float gradient_decay(const Options&) { return 0.0f; }
  static std::optional<float> linear_step_decay(const Options&) { return std::nullopt; }
  static Options without_gradient_decay(Options o) { return o; }  // its decay is decoupled
};

const config::Schema<LionOptions>& lion_schema() {
  using namespace config;
  static const auto s =
      Schema<LionOptions>("lion")
          .key("betas", &LionOptions::betas, list_of(real(Bounds::closed_open(0, 1)), 2),
               "[β1, β2]: the update's sign is of β1·m + (1 − β1)·g; the moment decays by β2")
          .key("weight_decay", &LionOptions::weight_decay, real(Bounds::at_least(0)),
               "decoupled decay w·(1 − lr·wd) of the parameters of two or more dimensions only; "
               "Lion wants 3–10× AdamW's (its lr is 3–10× smaller)");
  return s;
}

}  // namespace

OptimizerEntry lion_optimizer() {
  return {
      .name = "lion",
      .summary =
          "Lion (Chen et al. 2023): the sign of an interpolated moment, decoupled "
          "weight decay; half AdamW's state",
      .keys = config::erase(lion_schema()),
      .make = rule_factory<LionFamily>(),
      .update_summary = "Lion update of the trainable parameters (and of its moment per parameter)",
      .states = family_states<LionFamily>()};
}

std::unique_ptr<Optimizer> make_lion(Backend& backend, Tensor parameters, Tensor gradients,
                                     const LionOptions& options, std::vector<DecayRange> decay,
                                     int64_t trainable_offset) {
  return std::make_unique<RuleOptimizer<LionFamily>>(backend, std::move(parameters),
                                                     std::move(gradients), options,
                                                     std::move(decay), trainable_offset);
}

}  // namespace dtrain
