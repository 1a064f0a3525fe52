// An optimizer whose update is an element-wise rule (rule_passes.h): the step, its ranges, its
// state by name, weight prediction and a fresh copy, written once for every such optimizer. A
// family says what is its own:
//
//   struct Family {
//     using Options = ...;                       // its row's options (optimizer_table.h)
//     using Coeffs = ...;                        // its rules' step scalars
//     static constexpr const char* kName;        // optimizer.name
//     static constexpr bool kCountsSteps;        // a step count t ("step" in checkpoints)
//     static constexpr bool kDecoupledDecay;     // decay only the ranges that decay (decay.h)
//     static void check(const Options&);         // what the keys' own checks cannot see
//     static std::vector<std::string> states(const Options&);    // state buffers, by name
//     template <class Run> static void with_rule(const Options&, Run&& run);  // run(Rule{})
//     static Coeffs coeffs(const Options&, float lr, int64_t t, bool decay);
//     static float gradient_decay(const Options&);                // Optimizer::gradient_decay
//     static std::optional<float> linear_step_decay(const Options&);
//     static Options without_gradient_decay(Options);
//   };
//
// with_rule picks the rule variant (SGD's kind, AdamW's lerp form) once per call, so that each
// variant runs as a loop of its own without branches inside.
#pragma once
#include <algorithm>  // max, min
#include <any>        // rule_factory: a row's options
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/run_pass.h"  // run_pass: the passes are run (and their loops built) here
#include "core/error.h"
#include "optim/decay.h"              // DecayRange, cover
#include "optim/optimizer.h"          // Optimizer
#include "optim/rule_passes.h"        // StepPass, PredictPass, ...
#include "optim/weight_prediction.h"  // WeightPrediction, GradientSum

namespace dtrain {

template <class Family>
class RuleOptimizer final : public Optimizer, public WeightPrediction {
 public:
  using Options = typename Family::Options;

  // Updates parameters[trainable_offset, P) from gradients of the same range; the frozen prefix
  // is never touched. `decay` says which parts decay where the family's decay is decoupled
  // (elements it does not cover decay). The state starts at zero, the step count at 0.
  RuleOptimizer(Backend& backend, Tensor parameters, Tensor gradients, Options options,
                std::vector<DecayRange> decay = {}, int64_t trainable_offset = 0)
      : Optimizer(backend, std::move(parameters), std::move(gradients), trainable_offset),
        options_(std::move(options)),
        runs_(cover(std::move(decay), parameters_.numel())) {
    Family::check(options_);
    for (std::string& name : Family::states(options_))
      states_.emplace_back(std::move(name), Tensor{});  // allocated at first use: states()
  }

  std::string name() const override { return Family::kName; }
  void begin_step() override {
    if constexpr (Family::kCountsSteps) ++step_;
  }
  using Optimizer::step_range;
  void step_range(float lr, const Tensor& parameters, const Tensor& gradients, int64_t offset,
                  int64_t count) override {
    const auto [begin, end] = clipped_range(parameters, gradients, offset, count, "step_range");
    if (end <= begin) return;
    check_begun("step_range");
    if (!pieces_.empty()) return step_shard(lr, parameters, gradients, begin, end);
    for_each_run(begin, end, [&](auto rule, int64_t from, const Shape& s, bool decay) {
      using R = decltype(rule);
      const auto c = Family::coeffs(options_, lr, step_, decay);
      run_pass(backend_, rule::StepPass<R>{c}, buffers(from, s, {parameters, gradients}));
    });
  }

  void shard(std::vector<ShardPiece> pieces) override {
    DTRAIN_CHECK(!pieces.empty()) << Family::kName << ": a shard of no pieces";
    pieces_ = std::move(pieces);
    const Shape compact{owned_elements()};
    for (auto& state : states_) state.second = Tensor{};  // compact, at first use
  }

  std::vector<std::pair<std::string, Tensor>> state_buffers() const override { return states(); }
  std::vector<std::pair<std::string, int64_t>> counters() const override {
    if constexpr (Family::kCountsSteps) return {{"step", step_}};
    return {};
  }
  void load_counter(const std::string& name, int64_t value) override {
    if (!Family::kCountsSteps || name != "step") return Optimizer::load_counter(name, value);
    DTRAIN_CHECK(value >= 0) << Family::kName << ": a step count of " << value;
    step_ = value;
  }

  WeightPrediction* prediction() override { return this; }
  float gradient_decay() const override { return Family::gradient_decay(options_); }
  std::optional<float> linear_step_decay() const override {
    return Family::linear_step_decay(options_);
  }
  std::unique_ptr<Optimizer> fresh(Tensor parameters, Tensor gradients,
                                   bool gradient_decay) const override {
    DTRAIN_CHECK(pieces_.empty()) << "fresh(): not available to a sharded optimizer";
    return std::make_unique<RuleOptimizer>(
        backend_, std::move(parameters), std::move(gradients),
        gradient_decay ? options_ : Family::without_gradient_decay(options_), runs_,
        trainable_offset_);
  }

  // ---- WeightPrediction: the step's own rule on other inputs ----
  void step_range_delta(float lr, const Tensor& parameters, const Tensor& gradients,
                        const Tensor& delta, int64_t offset, int64_t count) override {
    check_model_size(delta, "step_range_delta");
    const auto [begin, end] =
        clipped_range(parameters, gradients, offset, count, "step_range_delta");
    if (end <= begin) return;
    check_begun("step_range_delta");
    for_each_run(begin, end, [&](auto rule, int64_t from, const Shape& s, bool decay) {
      using R = decltype(rule);
      const auto c = Family::coeffs(options_, lr, step_, decay);
      run_pass(backend_, rule::StepDeltaPass<R>{c},
               buffers(from, s, {parameters, gradients, delta}));
    });
  }
  void predict_range(float lr, const Tensor& out, const Tensor& parameters, const Tensor& gradients,
                     int64_t offset, int64_t count) const override {
    check_model_size(out, "predict_range");
    const auto [begin, end] = clipped_range(parameters, gradients, offset, count, "predict_range");
    for_each_run(begin, end, [&](auto rule, int64_t from, const Shape& s, bool decay) {
      using R = decltype(rule);
      const auto c = Family::coeffs(options_, lr, step_ + 1, decay);
      run_pass(backend_, rule::PredictPass<R>{c}, buffers(from, s, {out, parameters, gradients}));
    });
  }
  void step_predict_range(float lr, const Tensor& parameters, const Tensor& gradients,
                          const Tensor& ghat, const Tensor& out, int64_t offset,
                          int64_t count) override {
    check_model_size(ghat, "step_predict_range");
    check_model_size(out, "step_predict_range");
    const auto [begin, end] =
        clipped_range(parameters, gradients, offset, count, "step_predict_range");
    if (end <= begin) return;
    check_begun("step_predict_range");
    for_each_run(begin, end, [&](auto rule, int64_t from, const Shape& s, bool decay) {
      using R = decltype(rule);
      const auto c = Family::coeffs(options_, lr, step_, decay);
      const auto next = Family::coeffs(options_, lr, step_ + 1, decay);
      run_pass(backend_, rule::StepPredictPass<R>{c, next},
               buffers(from, s, {parameters, gradients, ghat, out}));
    });
  }
  double step_range_dot(float lr, const Tensor& parameters, const Tensor& gradients, float alpha,
                        const Tensor& other, const Tensor& scratch, int64_t offset,
                        int64_t count) override {
    check_model_size(other, "step_range_dot");
    check_model_size(scratch, "step_range_dot");
    const auto [begin, end] = clipped_range(parameters, gradients, offset, count, "step_range_dot");
    if (end <= begin) return 0;
    check_begun("step_range_dot");
    double sum = 0;  // the runs' sums in layout order: fixed by the layout
    for_each_run(begin, end, [&](auto rule, int64_t from, const Shape& s, bool decay) {
      using R = decltype(rule);
      const auto c = Family::coeffs(options_, lr, step_, decay);
      sum += run_sum_pass(backend_, rule::StepDotPass<R>{c, alpha},
                          buffers(from, s, {parameters, gradients, other}), scratch.slice(from, s));
    });
    return sum;
  }
  void predict_range_sum(float lr, const Tensor& out, const Tensor& parameters,
                         const GradientSum& ghat, int64_t offset, int64_t count) const override {
    check_model_size(out, "predict_range_sum");
    check_model_size(ghat.x, "predict_range_sum");
    const auto [begin, end] = clipped_range(parameters, ghat.y, offset, count, "predict_range_sum");
    for_each_run(begin, end, [&](auto rule, int64_t from, const Shape& s, bool decay) {
      using R = decltype(rule);
      const auto c = Family::coeffs(options_, lr, step_ + 1, decay);
      run_pass(backend_, rule::PredictSumPass<R>{c, ghat.alpha, ghat.beta},
               buffers(from, s, {out, parameters, ghat.x, ghat.y}));
    });
  }

  const Options& options() const { return options_; }
  int64_t steps() const { return step_; }
  // The runs of equal decay, merged, covering the whole buffer in order.
  const std::vector<DecayRange>& decay_runs() const { return runs_; }

 private:
  // step_range of a sharded optimizer: its pieces within [begin, end), each buffer sliced where
  // the piece lies in it (the model's layout or the compact one; the state: compact).
  void step_shard(float lr, const Tensor& parameters, const Tensor& gradients, int64_t begin,
                  int64_t end) {
    const int64_t whole = parameters_.numel();
    auto at = [whole](const Tensor& t, int64_t global, int64_t compact, const Shape& s) {
      return t.slice(t.numel() == whole ? global : compact, s);
    };
    for (const ShardPiece& piece : pieces_) {
      const int64_t from = std::max(begin, piece.offset);
      const int64_t to = std::min(end, piece.offset + piece.count);
      if (to <= from) continue;
      for_each_run(from, to, [&](auto rule, int64_t run_from, const Shape& s, bool decay) {
        using R = decltype(rule);
        const int64_t compact = piece.compact + (run_from - piece.offset);
        std::vector<Tensor> b{at(parameters, run_from, compact, s),
                              at(gradients, run_from, compact, s)};
        for (const auto& state : states()) b.push_back(state.second.slice(compact, s));
        run_pass(backend_, rule::StepPass<R>{Family::coeffs(options_, lr, step_, decay)}, b);
      });
    }
  }
  // Calls body(rule, from, shape, decay) for each run of equal decay within [begin, end) (the
  // whole range at once where decay is coupled): a pass takes one weight decay.
  template <class Body>
  void for_each_run(int64_t begin, int64_t end, Body body) const {
    Family::with_rule(options_, [&](auto rule) {
      if constexpr (Family::kDecoupledDecay) {
        for (const DecayRange& r : runs_) {
          const int64_t from = std::max(begin, r.offset), to = std::min(end, r.offset + r.count);
          if (to > from) body(rule, from, Shape{to - from}, r.decay);
        }
      } else if (end > begin) {
        body(rule, begin, Shape{end - begin}, true);
      }
    });
  }
  // [from, from + s) of each of `front` (the pass's own buffers), then of the state buffers.
  std::vector<Tensor> buffers(int64_t from, const Shape& s,
                              std::initializer_list<Tensor> front) const {
    std::vector<Tensor> b;
    b.reserve(front.size() + states_.size());
    for (const Tensor& t : front) b.push_back(t.slice(from, s));
    for (const auto& state : states()) b.push_back(state.second.slice(from, s));
    return b;
  }
  void check_model_size(const Tensor& t, const char* what) const {
    DTRAIN_CHECK(pieces_.empty()) << what << ": not available to a sharded optimizer";
    DTRAIN_CHECK(t.numel() == parameters_.numel()) << what << " with buffers of another size";
  }
  void check_begun(const char* what) const {
    if constexpr (Family::kCountsSteps) {
      DTRAIN_CHECK(step_ >= 1) << Family::kName << "::" << what << " before begin_step";
    }
  }

  Options options_;
  std::vector<DecayRange> runs_;
  // The state buffers, zero at first use: a sharded optimizer (shard(), called after
  // construction) never holds the whole-model state, not even for a moment.
  const std::vector<std::pair<std::string, Tensor>>& states() const {
    for (auto& state : states_)
      if (!state.second.defined()) state.second = backend_.zeros({owned_buffer_elements()});
    return states_;
  }
  int64_t owned_buffer_elements() const {
    return pieces_.empty() ? parameters_.numel() : owned_elements();
  }

  mutable std::vector<std::pair<std::string, Tensor>> states_;
  int64_t step_ = 0;
};

}  // namespace dtrain

namespace dtrain {

// The factory of a row whose optimizer is RuleOptimizer<Family> (optimizer_table.h's
// OptimizerFactory).
template <class Family>
auto rule_factory() {
  return [](const std::any& options, Backend& backend, Tensor parameters, Tensor gradients,
            std::vector<DecayRange> decay, int64_t trainable_offset) -> std::unique_ptr<Optimizer> {
    return std::make_unique<RuleOptimizer<Family>>(
        backend, std::move(parameters), std::move(gradients),
        std::any_cast<const typename Family::Options&>(options), std::move(decay),
        trainable_offset);
  };
}

}  // namespace dtrain
