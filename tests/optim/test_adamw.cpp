// AdamW step by step against torch.optim.AdamW's formula in double, with weight decay on the
// matrices only; gradient clipping; the iteration-counted learning-rate schedules.
#include <doctest/doctest.h>

#include <algorithm>  // max
#include <cmath>
#include <vector>

#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "optim/weight_prediction.h"

using namespace dtrain;

namespace {

// A "model" of a 2×3 matrix (decayed) and a bias of 3 (not decayed): 9 parameters.
struct Model {
  std::unique_ptr<Backend> backend = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor w = backend->empty({9}), g = backend->empty({9});
  std::vector<DecayRange> ranges{{0, 6, true}, {6, 3, false}};
  Model() {
    for (int i = 0; i < 9; ++i) w.data<float>()[i] = 0.3f * static_cast<float>(i) - 1.0f;
  }
  void gradient(int step) {
    for (int i = 0; i < 9; ++i)
      g.data<float>()[i] = 0.05f * static_cast<float>((i * 5 + step * 3) % 11) - 0.2f;
  }
};

// AdamW's options as β1, β2, ε, weight decay (floats, as the optimizer rounds them).
AdamWOptions options(float beta1, float beta2, float eps, float weight_decay) {
  return {.weight_decay = weight_decay, .betas = {beta1, beta2}, .eps = eps};
}

// The optimizer's step count (bias correction's t).
int64_t steps(const Optimizer& o) {
  return o.counters().at(0).second;
}

struct Reference {
  std::vector<double> w, m, v;
  int64_t t = 0;
  void step(const Tensor& g, double lr, const AdamWOptions& o, const std::vector<bool>& decays) {
    ++t;
    const double beta1 = o.betas[0], beta2 = o.betas[1];
    const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(t));
    const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(t));
    for (size_t i = 0; i < w.size(); ++i) {
      const double gi = g.data<float>()[i];
      if (decays[i]) w[i] *= 1.0 - lr * o.weight_decay;
      m[i] = beta1 * m[i] + (1.0 - beta1) * gi;
      v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi;
      w[i] -= lr / bias1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bias2) + o.eps);
    }
  }
};

}  // namespace

TEST_CASE("AdamW over several steps equals the formula; only the matrix decays") {
  Model model;
  const AdamWOptions o = options(0.9f, 0.95f, 1e-8f, 0.1f);
  auto adamw = make_adamw(*model.backend, model.w, model.g, o, model.ranges);
  CHECK(adamw->name() == "adamw");
  REQUIRE(cover(model.ranges, 9).size() == 2);
  Reference ref{std::vector<double>(model.w.data<float>(), model.w.data<float>() + 9),
                std::vector<double>(9, 0.0), std::vector<double>(9, 0.0)};
  const std::vector<bool> decays{true, true, true, true, true, true, false, false, false};
  const float lrs[] = {1e-2f, 5e-3f, 2e-2f, 1e-3f};
  for (int step = 0; step < 4; ++step) {
    CAPTURE(step);
    model.gradient(step);
    adamw->step(lrs[step]);
    ref.step(model.g, lrs[step], o, decays);
    CHECK(steps(*adamw) == step + 1);  // bias correction's t
    for (int i = 0; i < 9; ++i) {
      CAPTURE(i);
      CHECK(model.w.data<float>()[i] == doctest::Approx(ref.w[i]).epsilon(1e-6));
    }
  }
}

TEST_CASE("AdamW's weight decay: decoupled, w·(1 − lr·wd), on the decayed ranges only") {
  Model model;
  for (int i = 0; i < 9; ++i) model.g.data<float>()[i] = 0.0f;  // no Adam step: decay alone
  const std::vector<float> before(model.w.data<float>(), model.w.data<float>() + 9);
  auto adamw = make_adamw(*model.backend, model.w, model.g, options(0.9f, 0.999f, 1e-8f, 0.5f),
                          model.ranges);
  adamw->step(0.1f);
  for (int i = 0; i < 9; ++i) {
    CAPTURE(i);
    const double expected = i < 6 ? before[i] * (1.0 - 0.1 * 0.5) : before[i];
    CHECK(model.w.data<float>()[i] == doctest::Approx(expected));
  }
}

TEST_CASE("AdamW: ranges of one step equal the whole step bit for bit; the frozen prefix stays") {
  Model a, b;
  const AdamWOptions o{};
  auto whole = make_adamw(*a.backend, a.w, a.g, o, a.ranges, /*trainable_offset=*/2);
  auto parts = make_adamw(*b.backend, b.w, b.g, o, b.ranges, 2);
  for (int step = 0; step < 3; ++step) {
    a.gradient(step), b.gradient(step);
    whole->step(1e-2f);
    // As sync steps layers while backward runs: the last range first.
    parts->begin_step();
    parts->step_range(1e-2f, 7, 2);
    parts->step_range(1e-2f, 4, 3);
    parts->step_range(1e-2f, 0, 4);
  }
  for (int i = 0; i < 9; ++i) CHECK(a.w.data<float>()[i] == b.w.data<float>()[i]);
  CHECK(a.w.data<float>()[0] == -1.0f);  // frozen
  CHECK(a.w.data<float>()[1] == 0.3f - 1.0f);
}

TEST_CASE("AdamW's state by name restores a run that continues bit for bit") {
  Model a, b;
  const AdamWOptions o{};
  auto run = make_adamw(*a.backend, a.w, a.g, o, a.ranges);
  for (int step = 0; step < 3; ++step) a.gradient(step), run->step(1e-2f);
  // A fresh optimizer given the saved state continues as the first one does.
  b.backend->copy(b.w, a.w);
  auto resumed = make_adamw(*b.backend, b.w, b.g, o, b.ranges);
  const auto saved = run->state_buffers(), fresh = resumed->state_buffers();
  REQUIRE(saved.size() == 2);
  CHECK(saved[0].first == "m");
  CHECK(saved[1].first == "v");
  for (size_t k = 0; k < saved.size(); ++k) b.backend->copy(fresh[k].second, saved[k].second);
  REQUIRE(run->counters().size() == 1);
  CHECK(run->counters()[0] == std::pair<std::string, int64_t>{"step", 3});
  resumed->load_counter("step", run->counters()[0].second);
  for (int step = 3; step < 6; ++step) {
    a.gradient(step), b.gradient(step);
    run->step(1e-2f);
    resumed->step(1e-2f);
  }
  for (int i = 0; i < 9; ++i) CHECK(a.w.data<float>()[i] == b.w.data<float>()[i]);
}

TEST_CASE("AdamW: a range outside the buffer is refused; a step before begin_step is an error") {
  Model model;
  CHECK_THROWS(make_adamw(*model.backend, model.w, model.g, AdamWOptions{}, {{5, 10, true}}));
  auto adamw = make_adamw(*model.backend, model.w, model.g, AdamWOptions{}, model.ranges);
  CHECK_THROWS(adamw->step_range(1e-3f, 0, 9));
}

TEST_CASE(
    "AdamW's weight prediction: the next step with ĝ, the state untouched; fused, bit for bit") {
  // SAPipe's x̃: what the step after the current one (t + 1) would write with ĝ, from the
  // moments as they are — computed here from the formula in double, and against the real step.
  Model model;
  const AdamWOptions o = options(0.9f, 0.98f, 1e-8f, 0.1f);
  auto optimizer = make_adamw(*model.backend, model.w, model.g, o, model.ranges);
  Optimizer& adamw = *optimizer;
  WeightPrediction& prediction = *adamw.prediction();
  Reference ref{std::vector<double>(model.w.data<float>(), model.w.data<float>() + 9),
                std::vector<double>(9, 0.0), std::vector<double>(9, 0.0)};
  const std::vector<bool> decays{true, true, true, true, true, true, false, false, false};
  for (int step = 0; step < 3; ++step) {
    model.gradient(step);
    adamw.step(1e-2f);
    ref.step(model.g, 1e-2f, o, decays);
  }
  Tensor ghat = model.backend->empty({9}), out = model.backend->empty({9});
  for (int i = 0; i < 9; ++i) ghat.data<float>()[i] = 0.02f * static_cast<float>(i) - 0.07f;
  const std::vector<float> w(model.w.data<float>(), model.w.data<float>() + 9);
  const Tensor m = adamw.state_buffers()[0].second, v = adamw.state_buffers()[1].second;
  const std::vector<float> m0(m.data<float>(), m.data<float>() + 9);
  const std::vector<float> v0(v.data<float>(), v.data<float>() + 9);
  // Only [2, 8): the rest of `out` stays as it was.
  for (int i = 0; i < 9; ++i) out.data<float>()[i] = 42.0f;
  prediction.predict_range(5e-3f, out, model.w, ghat, 2, 6);
  Reference next = ref;
  next.step(ghat, 5e-3, o, decays);  // t = 4
  for (int i = 0; i < 9; ++i) {
    CAPTURE(i);
    CHECK(model.w.data<float>()[i] == w[i]);  // weights, moments, t unchanged
    CHECK(m.data<float>()[i] == m0[i]);
    CHECK(v.data<float>()[i] == v0[i]);
    if (i < 2 || i >= 8)
      CHECK(out.data<float>()[i] == 42.0f);
    else
      CHECK(out.data<float>()[i] == doctest::Approx(next.w[i]).epsilon(1e-6));
  }
  CHECK(steps(adamw) == 3);
  // The prediction is the step it predicts, bit for bit.
  prediction.predict_range(5e-3f, out, model.w, ghat, 0, 9);
  const std::vector<float> predicted(out.data<float>(), out.data<float>() + 9);
  {
    Model twin;
    auto other = make_adamw(*twin.backend, twin.w, twin.g, o, twin.ranges);
    for (int step = 0; step < 3; ++step) {
      twin.gradient(step);
      other->step(1e-2f);
    }
    other->step(5e-3f, twin.w, ghat);
    for (int i = 0; i < 9; ++i) CHECK(twin.w.data<float>()[i] == predicted[i]);
  }
  // step_predict_range: step t = 4 with g, then the prediction of t = 5 with ĝ, in one pass —
  // the same bits as step_range followed by predict_range.
  Model twin;
  auto other_optimizer = make_adamw(*twin.backend, twin.w, twin.g, o, twin.ranges);
  Optimizer& other = *other_optimizer;
  for (int step = 0; step < 3; ++step) {
    twin.gradient(step);
    other.step(1e-2f);
  }
  Tensor out2 = twin.backend->empty({9});
  model.gradient(3);
  twin.gradient(3);
  adamw.begin_step();
  prediction.step_predict_range(2e-3f, model.w, model.g, ghat, out, 0, 9);
  other.begin_step();
  other.step_range(2e-3f, twin.w, twin.g, 0, 9);
  other.prediction()->predict_range(2e-3f, out2, twin.w, ghat, 0, 9);
  ref.step(model.g, 2e-3, o, decays);
  Reference after = ref;
  after.step(ghat, 2e-3, o, decays);
  for (int i = 0; i < 9; ++i) {
    CAPTURE(i);
    CHECK(model.w.data<float>()[i] == twin.w.data<float>()[i]);
    CHECK(out.data<float>()[i] == out2.data<float>()[i]);
    CHECK(model.w.data<float>()[i] == doctest::Approx(ref.w[i]).epsilon(1e-6));
    CHECK(out.data<float>()[i] == doctest::Approx(after.w[i]).epsilon(1e-6));
  }
  CHECK(steps(adamw) == 4);
}

TEST_CASE("AdamW follows torch.optim.AdamW's formula on two threads over many elements") {
  auto be = make_backend({DeviceChoice::cpu, 2, 0});
  const int64_t n = 100003;  // above the threading threshold, not a multiple of a vector
  Tensor w = be->empty({n}), g = be->empty({n});
  for (float wd : {0.0f, 0.1f}) {
    CAPTURE(wd);
    // A fresh optimizer (moments and step count at zero) from w's current values.
    const AdamWOptions o = options(0.9f, 0.999f, 1e-8f, wd);
    auto adamw = make_adamw(*be, w, g, o, {});
    std::vector<double> rw(n);
    if (wd == 0.0f)
      for (int64_t i = 0; i < n; ++i)
        w.data<float>()[i] = 0.5f - 0.001f * static_cast<float>(i % 1000);
    for (int64_t i = 0; i < n; ++i) rw[i] = w.data<float>()[i];
    Reference ref{rw, std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
    const std::vector<bool> decays(n, true);
    for (int64_t step = 1; step <= 5; ++step) {
      CAPTURE(step);
      for (int64_t i = 0; i < n; ++i)
        g.data<float>()[i] = 0.01f * static_cast<float>((i * 7 + step * 3) % 23) - 0.1f;
      adamw->step(1e-2f);
      ref.step(g, 1e-2f, o, decays);
      const Tensor m = adamw->state_buffers()[0].second, v = adamw->state_buffers()[1].second;
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        worst = std::max(worst, std::abs(w.data<float>()[i] - ref.w[i]));
        worst = std::max(worst, std::abs(m.data<float>()[i] - ref.m[i]));
        worst = std::max(worst, std::abs(v.data<float>()[i] - ref.v[i]) / (ref.v[i] + 1e-12));
      }
      CHECK(worst < 1e-5);
    }
  }
}

TEST_CASE("AdamW's first step moves each weight by lr against the gradient's sign") {
  // t = 1: m̂ = g, v̂ = g², so the step is lr·g/(|g| + ε) ≈ lr·sign(g) (no decay).
  auto be = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor w = be->zeros({3}), g = be->empty({3});
  g.data<float>()[0] = 4.0f, g.data<float>()[1] = -0.001f, g.data<float>()[2] = 0.0f;
  make_adamw(*be, w, g, options(0.9f, 0.999f, 1e-8f, 0.0f), {})->step(0.1f);
  CHECK(w.data<float>()[0] == doctest::Approx(-0.1));
  CHECK(w.data<float>()[1] == doctest::Approx(0.1).epsilon(1e-4));
  CHECK(w.data<float>()[2] == 0.0f);  // no gradient, no decay: unchanged
  CHECK(g.data<float>()[0] == 4.0f);  // gradients unchanged
  // Decoupled decay alone: w·(1 − lr·wd) with a zero gradient.
  Tensor w2 = be->empty({1}), g2 = be->zeros({1});
  w2.data<float>()[0] = 2.0f;
  make_adamw(*be, w2, g2, options(0.9f, 0.999f, 1e-8f, 0.5f), {})->step(0.1f);
  CHECK(w2.data<float>()[0] == doctest::Approx(2.0 * (1 - 0.05)));
}

TEST_CASE("clip_grad_norm: the global L2 norm, torch's coefficient, a no-op below the max") {
  auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor g = backend->empty({4});
  const float values[] = {3.0f, 0.0f, -4.0f, 0.0f};  // norm 5
  std::copy(values, values + 4, g.data<float>());
  CHECK(clip_coefficient(5.0, 10.0) == 1.0);
  CHECK(clip_coefficient(5.0, 1.0) == doctest::Approx(1.0 / (5.0 + 1e-6)));
  // Below the max: the gradient is left exactly as it is.
  CHECK(clip_grad_norm(*backend, g, 10.0) == doctest::Approx(5.0));
  CHECK(g.data<float>()[0] == 3.0f);
  CHECK(g.data<float>()[2] == -4.0f);
  // Above: scaled to norm max_norm·5/(5 + 1e-6).
  CHECK(clip_grad_norm(*backend, g, 1.0) == doctest::Approx(5.0));
  const double c = 1.0 / (5.0 + 1e-6);
  CHECK(g.data<float>()[0] == doctest::Approx(3.0 * c));
  CHECK(g.data<float>()[2] == doctest::Approx(-4.0 * c));
  CHECK(std::sqrt(backend->dot(g, g)) == doctest::Approx(1.0).epsilon(1e-5));
}

TEST_CASE("warmup_iterations: nanoGPT's lr·(it + 1)/(N + 1), then the schedule") {
  LrScheduleOptions o;
  o.base_lr = 1.0;
  o.warmup_iterations = 4;
  LrSchedule s(o);
  CHECK(s.counts_iterations());
  for (int it = 0; it < 4; ++it) CHECK(s.lr_at(0.0, it) == doctest::Approx((it + 1) / 5.0));
  CHECK(s.lr_at(0.5, 4) == 1.0);
  CHECK(s.lr_at(3.0, 1000) == 1.0);
}

TEST_CASE("cosine over train.max_iterations: after the warm-up, down to min_lr, then min_lr") {
  LrScheduleOptions o;
  o.name = "cosine";
  o.base_lr = 6e-4;
  o.min_lr = 6e-5;
  o.warmup_iterations = 10;
  o.total_iterations = 110;
  o.total_epochs = 1000;  // not used: the iterations count
  LrSchedule s(o);
  CHECK(s.lr_at(0.0, 0) == doctest::Approx(6e-4 / 11));
  CHECK(s.lr_at(0.0, 9) == doctest::Approx(6e-4 * 10 / 11));
  CHECK(s.lr_at(0.0, 10) == doctest::Approx(6e-4));
  CHECK(s.lr_at(0.0, 60) == doctest::Approx(6e-5 + (6e-4 - 6e-5) * 0.5));  // half-way
  CHECK(s.lr_at(0.0, 110) == doctest::Approx(6e-5));
  CHECK(s.lr_at(0.0, 500) == doctest::Approx(6e-5));
  // Without a warm-up it starts at lr.
  o.warmup_iterations = 0;
  o.total_iterations = 100;
  LrSchedule plain(o);
  CHECK(plain.lr_at(0.0, 0) == doctest::Approx(6e-4));
  CHECK(plain.lr_at(0.0, 50) == doctest::Approx(6e-5 + (6e-4 - 6e-5) * 0.5));
}

TEST_CASE("schedules without iteration counts give lr_at(epoch) exactly") {
  for (const char* name : {"constant", "step", "cosine"}) {
    LrScheduleOptions o;
    o.name = name;
    o.total_epochs = 7;
    o.warmup_epochs = 1.5;
    LrSchedule s(o);
    CHECK_FALSE(s.counts_iterations());
    for (double e : {0.0, 0.3, 1.7, 6.9}) CHECK(s.lr_at(e, 12345) == s.lr_at(e));
  }
}
