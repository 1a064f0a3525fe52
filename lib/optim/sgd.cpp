// The `sgd` row: SGD as an element rule (sgd_rule.h), one variant per kind of momentum.
#include "optim/sgd.h"

#include <fmt/format.h>  // fmt::format: the Nesterov rule's message

#include "optim/optimizer_table.h"  // OptimizerEntry
#include "optim/rule_optimizer.h"   // RuleOptimizer, rule_factory, run_pass
#include "optim/sgd_rule.h"

namespace dtrain {
namespace {

struct SgdFamily {
  using Options = SgdOptions;
  using Coeffs = sgd::Coeffs;
  static constexpr const char* kName = "sgd";
  static constexpr bool kCountsSteps = false;
  static constexpr bool kDecoupledDecay = false;

  static void check(const Options& o) {
    DTRAIN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0))
        << "Nesterov momentum needs momentum > 0 and dampening = 0";
  }
  static std::vector<std::string> states(const Options& o) {
    if (o.momentum == 0) return {};
    return {"momentum"};  // the checkpoint's optimizer.momentum
  }
  template <class Run>
  static void with_rule(const Options& o, Run&& run) {
    sgd::with_kind(sgd::kind_of(static_cast<float>(o.momentum), o.nesterov),
                   [&](auto kind) { run(sgd::Rule<decltype(kind)::value>{}); });
  }
  static Coeffs coeffs(const Options& o, float lr, int64_t, bool) {
    return sgd::coeffs(lr, static_cast<float>(o.momentum), static_cast<float>(o.dampening),
                       static_cast<float>(o.weight_decay));
  }
  static float gradient_decay(const Options& o) { return static_cast<float>(o.weight_decay); }
  static std::optional<float> linear_step_decay(const Options& o) {
    if (o.momentum != 0) return std::nullopt;
    return static_cast<float>(o.weight_decay);
  }
  static Options without_gradient_decay(Options o) {
    o.weight_decay = 0;
    return o;
  }
};

const config::Schema<SgdOptions>& sgd_schema() {
  using namespace config;
  static const auto s =
      Schema<SgdOptions>("sgd")
          .key("momentum", &SgdOptions::momentum, real(Bounds::closed_open(0, 1)),
               "heavy-ball momentum (PyTorch semantics)")
          .key("dampening", &SgdOptions::dampening, real(Bounds::closed_open(0, 1)),
               "momentum dampening")
          .key("weight_decay", &SgdOptions::weight_decay, real(Bounds::at_least(0)),
               "L2 penalty wd·w added to the gradient of every parameter")
          .key("nesterov", &SgdOptions::nesterov, boolean(),
               "Nesterov momentum (needs momentum > 0, dampening 0)");
  return s;
}

// Nesterov's look-ahead is defined for undampened momentum only (as in PyTorch's SGD). A
// momentum or dampening that is wrong by itself is reported once, not again here.
void check_sgd(const std::any& options, config::Reader& r, const std::string& section) {
  const auto& o = std::any_cast<const SgdOptions&>(options);
  const std::string momentum = section + ".momentum", dampening = section + ".dampening";
  if (o.nesterov && !r.has_problem(momentum) && !r.has_problem(dampening) &&
      (o.momentum <= 0 || o.dampening != 0))
    r.add(section + ".nesterov",
          fmt::format("needs momentum > 0 and dampening 0, got momentum {} and dampening {}",
                      o.momentum, o.dampening));
}

}  // namespace

OptimizerEntry sgd_optimizer() {
  return {.name = "sgd",
          .summary = "SGD with momentum, dampening, weight decay and Nesterov (torch.optim.SGD)",
          .keys = config::erase(sgd_schema()),
          .make = rule_factory<SgdFamily>(),
          .update_summary = "SGD update of the trainable parameters",
          .check = check_sgd,
          .states = family_states<SgdFamily>()};
}

std::unique_ptr<Optimizer> make_sgd(Backend& backend, Tensor parameters, Tensor gradients,
                                    const SgdOptions& options, int64_t trainable_offset) {
  return std::make_unique<RuleOptimizer<SgdFamily>>(backend, std::move(parameters),
                                                    std::move(gradients), options,
                                                    std::vector<DecayRange>{}, trainable_offset);
}

void sgd_step_accumulate(Backend& backend, const Tensor& weights, const Tensor& gradients,
                         const Tensor& sum, float lr, float weight_decay, bool add) {
  // A pass for each flag pair, so that the branches stay out of its loop.
  sgd::with_accumulate_flags(weight_decay, add, [&](auto decay, auto keep_adding) {
    using Pass = sgd::AccumulatePass<decltype(decay)::value, decltype(keep_adding)::value>;
    run_pass(backend, Pass{lr, weight_decay}, {weights, gradients, sum});
  });
}

}  // namespace dtrain
