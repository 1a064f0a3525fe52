// Every row of the optimizer table, in every variant of its rule: the fused passes of weight
// prediction (optim/weight_prediction.h) are the step's own arithmetic, bit for bit — a
// prediction is the step it predicts, the step with its change is the step, and the one-pass
// sum and prediction equal their parts composed of simpler backend ops (what a backend that
// cannot sum while it passes runs). Sizes above the threading threshold, not a multiple of the
// sum's lanes; two threads.
#include <doctest/doctest.h>

#include <cstring>  // memcmp
#include <string>
#include <vector>

#include "optim/adamw.h"  // AdamWOptions
#include "optim/lion.h"   // LionOptions
#include "optim/optimizer_table.h"
#include "optim/sgd.h"  // SgdOptions, sgd_step_accumulate
#include "optim/weight_prediction.h"

using namespace dtrain;

namespace {

constexpr int64_t kSize = 200003;

// a + b·(i mod `mod`) at element i.
Tensor filled(Backend& be, float a, float b, int mod, int64_t n = kSize) {
  Tensor t = be.empty({n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = a + b * static_cast<float>(i % mod);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// Every optimizer with the options that take each variant of its rule: SGD plain, with
// momentum and dampening, Nesterov; AdamW with both lerp forms; Lion.
std::vector<std::pair<std::string, OptimizerChoice>> variants() {
  std::vector<std::pair<std::string, OptimizerChoice>> v;
  for (const OptimizerEntry& row : optimizers())
    v.emplace_back(row.name, OptimizerChoice(row.name));
  OptimizerChoice plain("sgd"), damped("sgd"), nesterov("sgd"), adamw_high("adamw");
  plain.get<SgdOptions>() = {0.0, 0.0, 0.01, false};
  damped.get<SgdOptions>() = {0.9, 0.1, 5e-5, false};
  nesterov.get<SgdOptions>() = {0.9, 0.0, 0.01, true};
  adamw_high.get<AdamWOptions>().betas = {0.3, 0.98};  // 1 − β1 above a half: the other lerp
  v.emplace_back("sgd plain", plain);
  v.emplace_back("sgd dampened", damped);
  v.emplace_back("sgd nesterov", nesterov);
  v.emplace_back("adamw beta1 0.3", adamw_high);
  for (auto& [name, choice] : v)
    if (choice.name != "sgd") {  // decoupled decay, on the runs that decay
      if (auto* a = std::any_cast<AdamWOptions>(&choice.options)) a->weight_decay = 0.1;
      if (auto* l = std::any_cast<LionOptions>(&choice.options)) l->weight_decay = 0.5;
    }
  return v;
}

// An optimizer over kSize elements whose state is not zero: some steps taken already.
struct Trained {
  std::unique_ptr<Backend> be = make_backend({DeviceChoice::cpu, 2, 0});
  Tensor w = filled(*be, 1.0f, 0.001f, 7), g = be->empty({kSize});
  std::unique_ptr<Optimizer> opt;
  // Decay on the first half only where the row's decay is decoupled (two runs, each a pass of
  // its own), or (`one_run`) on every element.
  explicit Trained(const OptimizerChoice& choice, bool one_run = false)
      : opt(make_optimizer(choice, *be, w, g,
                           one_run
                               ? std::vector<DecayRange>{}
                               : std::vector<DecayRange>{{0, kSize / 2, true},
                                                         {kSize / 2, kSize - kSize / 2, false}})) {
    for (int step = 0; step < 3; ++step) {
      be->copy(g, filled(*be, 0.5f - 0.1f * static_cast<float>(step), -0.01f, 5 + step));
      opt->step(1e-2f);
    }
    be->copy(g, filled(*be, 0.5f, -0.01f, 5));
  }
  std::vector<Tensor> state() const {
    std::vector<Tensor> copies;
    for (const auto& [name, buffer] : opt->state_buffers()) {
      copies.push_back(be->empty(buffer.shape()));
      be->copy(copies.back(), buffer);
    }
    return copies;
  }
  bool state_is(const std::vector<Tensor>& other) const {
    const auto mine = opt->state_buffers();
    for (size_t k = 0; k < mine.size(); ++k)
      if (!same_bits(mine[k].second, other.at(k))) return false;
    return mine.size() == other.size();
  }
};

}  // namespace

TEST_CASE("every optimizer predicts its step bit for bit and changes nothing predicting") {
  for (const auto& [name, choice] : variants()) {
    CAPTURE(name);
    Trained a(choice), b(choice);
    const Tensor out = a.be->empty({kSize}), w0 = a.be->empty({kSize});
    a.be->copy(w0, a.w);
    const std::vector<Tensor> state0 = a.state();
    WeightPrediction* prediction = a.opt->prediction();
    REQUIRE(prediction != nullptr);
    prediction->predict_range(5e-3f, out, a.w, a.g, 0, kSize);
    CHECK(same_bits(a.w, w0));  // weights and state unchanged
    CHECK(a.state_is(state0));
    b.opt->step(5e-3f);
    CHECK(same_bits(out, b.w));
  }
}

TEST_CASE("every optimizer's step with its change, and step then prediction, in one pass") {
  for (const auto& [name, choice] : variants()) {
    CAPTURE(name);
    Trained a(choice), b(choice), c(choice);
    const Tensor w0 = a.be->empty({kSize}), delta = a.be->empty({kSize});
    a.be->copy(w0, a.w);
    a.opt->begin_step();
    a.opt->prediction()->step_range_delta(5e-3f, a.w, a.g, delta, 0, kSize);
    b.opt->step(5e-3f);
    CHECK(same_bits(a.w, b.w));
    CHECK(a.state_is(b.state()));
    int differing = 0;  // new − old, exactly
    for (int64_t i = 0; i < kSize; ++i)
      differing += delta.data<float>()[i] != a.w.data<float>()[i] - w0.data<float>()[i];
    CHECK(differing == 0);

    // Step t with g, then the prediction of t + 1 with ĝ (another buffer, or g itself: wp2).
    for (bool ghat_is_g : {false, true}) {
      CAPTURE(ghat_is_g);
      Trained d(choice), e(choice);
      const Tensor p = filled(*d.be, -0.25f, 0.02f, 11);
      const Tensor out1 = d.be->empty({kSize}), out2 = d.be->empty({kSize});
      d.opt->begin_step();
      d.opt->prediction()->step_predict_range(2e-3f, d.w, d.g, ghat_is_g ? d.g : p, out1, 0, kSize);
      e.opt->begin_step();
      e.opt->step_range(2e-3f, e.w, e.g, 0, kSize);
      e.opt->prediction()->predict_range(2e-3f, out2, e.w, ghat_is_g ? e.g : p, 0, kSize);
      CHECK(same_bits(d.w, e.w));
      CHECK(same_bits(out1, out2));
      CHECK(d.state_is(e.state()));
    }
  }
}

TEST_CASE("SAPipe's wp3 passes: the one-pass sum and prediction equal their parts, bit for bit") {
  // The sum pass steps, forms g + α·other and sums it with the step's change; its parts are the
  // step with its change into a scratch buffer, then the backend's axpby_dot. (One run of decay:
  // over several, the sum is the runs' sums in layout order.) The prediction with α·x + β·y
  // formed in the pass equals axpby into y followed by the prediction.
  for (const auto& [name, choice] : variants()) {
    CAPTURE(name);
    Trained a(choice, true), b(choice, true);
    const Tensor other = filled(*a.be, 0.3f, 0.02f, 11), x = filled(*a.be, -0.2f, 0.03f, 13);
    const Tensor scratch = a.be->empty({kSize});
    a.opt->begin_step();
    const double fused =
        a.opt->prediction()->step_range_dot(1e-3f, a.w, a.g, -0.5f, other, scratch, 0, kSize);
    b.opt->begin_step();
    b.opt->prediction()->step_range_delta(1e-3f, b.w, b.g, scratch, 0, kSize);
    const double parts = b.be->axpby_dot(-0.5f, other, 1.0f, b.g, scratch);
    CHECK(fused == parts);
    CHECK(fused != 0.0);
    CHECK(same_bits(a.w, b.w));
    CHECK(same_bits(a.g, b.g));
    CHECK(a.state_is(b.state()));

    const Tensor out = a.be->empty({kSize}), out2 = a.be->empty({kSize});
    a.opt->prediction()->predict_range_sum(1e-3f, out, a.w, GradientSum{0.25f, x, 1.5f, a.g}, 0,
                                           kSize);
    b.be->axpby(0.25f, x, 1.5f, b.g);
    b.opt->prediction()->predict_range(1e-3f, out2, b.w, b.g, 0, kSize);
    CHECK(same_bits(out, out2));
  }
}

TEST_CASE("a step over ranges equals the whole step; ranges outside the trainable part stay") {
  for (const auto& [name, choice] : variants()) {
    CAPTURE(name);
    auto be = make_backend({DeviceChoice::cpu, 1, 0});
    const int64_t n = 9;
    Tensor wa = filled(*be, -1.0f, 0.3f, 9, n), wb = filled(*be, -1.0f, 0.3f, 9, n);
    Tensor g = be->empty({n});
    const std::vector<DecayRange> decay{{2, 4, true}, {6, 3, false}};
    auto whole = make_optimizer(choice, *be, wa, g, decay, /*trainable_offset=*/2);
    auto parts = make_optimizer(choice, *be, wb, g, decay, 2);
    for (int step = 0; step < 3; ++step) {
      for (int i = 0; i < n; ++i)
        g.data<float>()[i] = 0.05f * static_cast<float>((i * 5 + step * 3) % 11) - 0.2f;
      whole->step(1e-2f);
      parts->begin_step();  // as sync steps layers while backward runs: the last range first
      parts->step_range(1e-2f, 7, 2);
      parts->step_range(1e-2f, 4, 3);
      parts->step_range(1e-2f, 0, 4);
    }
    CHECK(same_bits(wa, wb));
    CHECK(wa.data<float>()[0] == -1.0f);  // frozen
    CHECK(wa.data<float>()[1] == 0.3f - 1.0f);
  }
}

TEST_CASE("a fresh optimizer of the same row has its own zero state and the same step") {
  for (const auto& [name, choice] : variants()) {
    CAPTURE(name);
    Trained a(choice);
    Backend* be = a.be.get();
    Tensor w = filled(*be, 1.0f, 0.001f, 7), g = filled(*be, 0.5f, -0.01f, 5);
    Tensor w2 = filled(*be, 1.0f, 0.001f, 7);
    auto copy = a.opt->fresh(w, g, /*gradient_decay=*/true);
    auto original = make_optimizer(choice, *be, w2, g,
                                   {{0, kSize / 2, true}, {kSize / 2, kSize - kSize / 2, false}});
    CHECK(copy->name() == choice.name);
    for (const auto& [state, buffer] : copy->state_buffers()) {
      CAPTURE(state);
      CHECK(be->dot(buffer, buffer) == 0.0);
    }
    copy->step(1e-2f);
    original->step(1e-2f);
    CHECK(same_bits(w, w2));
  }
}

TEST_CASE("SGD follows PyTorch's formulas; its capabilities say what HPSGD may do with it") {
  auto be = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor w = be->empty({2}), g = be->empty({2});
  w.data<float>()[0] = 1.0f, w.data<float>()[1] = -2.0f;
  g.data<float>()[0] = 0.5f, g.data<float>()[1] = 0.25f;
  auto sgd = make_sgd(*be, w, g, SgdOptions{0.9, 0.0, 0.01, false});
  sgd->step(0.1f);
  const Tensor v = sgd->state_buffers().at(0).second;
  // g' = g + wd·w = 0.51; v = 0.51; w = 1 − 0.1·0.51
  CHECK(v.data<float>()[0] == doctest::Approx(0.51));
  CHECK(w.data<float>()[0] == doctest::Approx(0.949));
  sgd->step(0.1f);
  // g' = 0.5 + 0.01·0.949 = 0.50949; v = 0.9·0.51 + 0.50949 = 0.96849; w = 0.949 − 0.096849
  CHECK(v.data<float>()[0] == doctest::Approx(0.96849));
  CHECK(w.data<float>()[0] == doctest::Approx(0.852151));
  CHECK(sgd->gradient_decay() == 0.01f);
  CHECK_FALSE(sgd->linear_step_decay().has_value());  // momentum: not a sum of steps
  // Nesterov: step = g' + μ·v
  Tensor wn = be->empty({1}), gn = be->empty({1});
  wn.data<float>()[0] = 1.0f, gn.data<float>()[0] = 1.0f;
  make_sgd(*be, wn, gn, SgdOptions{0.9, 0.0, 0.0, true})->step(0.1f);
  CHECK(wn.data<float>()[0] == doctest::Approx(1 - 0.1 * (1 + 0.9)));
  // Plain SGD keeps no state and steps linearly.
  auto plain = make_sgd(*be, wn, gn, SgdOptions{0.0, 0.0, 0.25, false});
  CHECK(plain->state_buffers().empty());
  CHECK(plain->linear_step_decay() == 0.25f);
  plain->step(0.5f);
  CHECK(wn.data<float>()[0] == doctest::Approx(0.81 - 0.5 * (1 + 0.25 * 0.81)));
  // Decoupled decay is not the gradient's.
  for (const char* decoupled : {"adamw", "lion"}) {
    CAPTURE(decoupled);
    auto o = make_optimizer(OptimizerChoice(decoupled), *be, w, g, {});
    CHECK(o->gradient_decay() == 0.0f);
    CHECK_FALSE(o->linear_step_decay().has_value());
  }
}

TEST_CASE("sgd_step_accumulate steps with ĝ = g + wd·w and keeps ĝ (or adds it)") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = 200000;  // above the threading threshold
  Tensor w = be->empty({n}), g = be->empty({n}), a = be->empty({n});
  for (int64_t i = 0; i < n; ++i) {
    w.data<float>()[i] = 1.0f + 0.001f * static_cast<float>(i % 7);
    g.data<float>()[i] = 0.5f - 0.01f * static_cast<float>(i % 5);
    a.data<float>()[i] = 3.0f;
  }
  for (float wd : {0.0f, 0.01f}) {
    for (bool add : {false, true}) {
      CAPTURE(wd);
      CAPTURE(add);
      Tensor w2 = be->empty({n}), a2 = be->empty({n});
      be->copy(w2, w);
      be->copy(a2, a);
      sgd_step_accumulate(*be, w2, g, a2, 0.1f, wd, add);
      for (int64_t i : {int64_t{0}, int64_t{3}, n - 1}) {
        const float gi = g.data<float>()[i] + wd * w.data<float>()[i];
        CHECK(a2.data<float>()[i] == (add ? a.data<float>()[i] + gi : gi));
        CHECK(w2.data<float>()[i] == w.data<float>()[i] - 0.1f * gi);
      }
    }
  }
  CHECK(g.data<float>()[3] == 0.5f - 0.01f * 3);  // gradients unchanged
}
