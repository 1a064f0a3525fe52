// The `adamw` row: AdamW as an element rule (adamw_rule.h), one variant per lerp form.
#include "optim/adamw.h"

#include "optim/adamw_rule.h"
#include "optim/optimizer_table.h"  // OptimizerEntry
#include "optim/rule_optimizer.h"   // RuleOptimizer, rule_factory

namespace dtrain {
namespace {

struct AdamWFamily {
  using Options = AdamWOptions;
  using Coeffs = adamw::Coeffs;
  static constexpr const char* kName = "adamw";
  static constexpr bool kCountsSteps = true;  // the bias corrections' t
  static constexpr bool kDecoupledDecay = true;

  static void check(const Options& o) {
    DTRAIN_CHECK(o.betas.size() == 2) << "adamw: betas needs two entries";
  }
  static std::vector<std::string> states(const Options&) { return {"m", "v"}; }
  static Coeffs coeffs(const Options& o, float lr, int64_t t, bool decay) {
    return adamw::coeffs(lr, static_cast<float>(o.betas[0]), static_cast<float>(o.betas[1]),
                         static_cast<float>(o.eps),
                         decay ? static_cast<float>(o.weight_decay) : 0.0f, t);
  }
  // The lerp form follows β1 alone: the same for every step.
  template <class Run>
  static void with_rule(const Options& o, Run&& run) {
    if (adamw::weight_below_half(coeffs(o, 0.0f, 1, false)))
      run(adamw::Rule<true>{});
    else
      run(adamw::Rule<false>{});
  }
  static float gradient_decay(const Options&) { return 0.0f; }
  static std::optional<float> linear_step_decay(const Options&) { return std::nullopt; }
  static Options without_gradient_decay(Options o) { return o; }  // its decay is decoupled
};

const config::Schema<AdamWOptions>& adamw_schema() {
  using namespace config;
  static const auto s =
      Schema<AdamWOptions>("adamw")
          .key("weight_decay", &AdamWOptions::weight_decay, real(Bounds::at_least(0)),
               "decoupled decay w·(1 − lr·wd) of the parameters of two or more dimensions only "
               "(not biases, norms' weights)")
          .key("betas", &AdamWOptions::betas, list_of(real(Bounds::closed_open(0, 1)), 2),
               "[β1, β2]: the decay rates of the first and second moments")
          .key("eps", &AdamWOptions::eps, real(Bounds::above(0)),
               "added to the second moment's root in the denominator");
  return s;
}

}  // namespace

OptimizerEntry adamw_optimizer() {
  return {.name = "adamw",
          .summary =
              "AdamW (Loshchilov and Hutter 2019; torch.optim.AdamW): decoupled weight "
              "decay, bias-corrected moments",
          .keys = config::erase(adamw_schema()),
          .make = rule_factory<AdamWFamily>(),
          .update_summary =
              "AdamW update of the trainable parameters (and of its 2 moments per parameter)",
          .states = family_states<AdamWFamily>()};
}

std::unique_ptr<Optimizer> make_adamw(Backend& backend, Tensor parameters, Tensor gradients,
                                      const AdamWOptions& options, std::vector<DecayRange> decay,
                                      int64_t trainable_offset) {
  return std::make_unique<RuleOptimizer<AdamWFamily>>(backend, std::move(parameters),
                                                      std::move(gradients), options,
                                                      std::move(decay), trainable_offset);
}

}  // namespace dtrain
