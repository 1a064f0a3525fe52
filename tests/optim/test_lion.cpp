// Lion step by step against the paper's update (Chen et al. 2023, Program 1) in double, with
// decoupled weight decay on the matrices only; its state is one moment, half of AdamW's.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "optim/adamw.h"  // make_adamw: the state it halves
#include "optim/lion.h"
#include "optim/optimizer_table.h"

using namespace dtrain;

namespace {

// A 2×3 matrix (decayed) and a bias of 3 (not decayed): 9 parameters.
struct Model {
  std::unique_ptr<Backend> backend = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor w = backend->empty({9}), g = backend->empty({9});
  std::vector<DecayRange> ranges{{0, 6, true}, {6, 3, false}};
  Model() {
    for (int i = 0; i < 9; ++i) w.data<float>()[i] = 0.3f * static_cast<float>(i) - 1.0f;
  }
  // Gradients whose sign changes between steps for some elements, so that the interpolation's
  // sign differs from the gradient's (the moment outweighs a small opposite gradient).
  void gradient(int step) {
    for (int i = 0; i < 9; ++i) {
      const float size = 0.05f + 0.1f * static_cast<float>((i * 3 + step) % 5);
      g.data<float>()[i] = (i + step) % 3 == 0 ? -0.2f * size : size;
    }
  }
};

double sign(double x) {
  return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
}

// The paper's Program 1 in double.
struct Reference {
  std::vector<double> w, m;
  int opposite = 0;  // elements whose update's sign was not the gradient's
  void step(const Tensor& g, double lr, const LionOptions& o, const std::vector<bool>& decays) {
    const double beta1 = o.betas[0], beta2 = o.betas[1];
    for (size_t i = 0; i < w.size(); ++i) {
      const double gi = g.data<float>()[i];
      const double c = beta1 * m[i] + (1.0 - beta1) * gi;
      REQUIRE(std::abs(c) > 1e-4);  // far from 0: float and double agree on its sign
      opposite += sign(c) != sign(gi);
      if (decays[i]) w[i] *= 1.0 - lr * o.weight_decay;
      w[i] -= lr * sign(c);
      m[i] = beta2 * m[i] + (1.0 - beta2) * gi;
    }
  }
};

}  // namespace

TEST_CASE("Lion over several steps equals the paper's update; only the matrix decays") {
  Model model;
  const LionOptions o{.betas = {0.9f, 0.99f}, .weight_decay = 1.0f};
  auto lion = make_lion(*model.backend, model.w, model.g, o, model.ranges);
  CHECK(lion->name() == "lion");
  Reference ref{std::vector<double>(model.w.data<float>(), model.w.data<float>() + 9),
                std::vector<double>(9, 0.0)};
  const std::vector<bool> decays{true, true, true, true, true, true, false, false, false};
  const float lrs[] = {1e-2f, 5e-3f, 2e-2f, 1e-3f, 1e-2f};
  for (int step = 0; step < 5; ++step) {
    CAPTURE(step);
    model.gradient(step);
    lion->step(lrs[step]);
    ref.step(model.g, lrs[step], o, decays);
    const Tensor m = lion->state_buffers().at(0).second;
    for (int i = 0; i < 9; ++i) {
      CAPTURE(i);
      CHECK(model.w.data<float>()[i] == doctest::Approx(ref.w[i]).epsilon(1e-6));
      CHECK(m.data<float>()[i] == doctest::Approx(ref.m[i]).epsilon(1e-6));
    }
  }
  CHECK(ref.opposite > 0);  // the interpolation's sign mattered
}

TEST_CASE("Lion's update: lr·sign per element, 0 for a zero interpolation, decay w·(1 − lr·wd)") {
  auto be = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor w = be->empty({3}), g = be->empty({3});
  const float ws[] = {1.0f, 1.0f, 2.0f}, gs[] = {4.0f, -0.001f, 0.0f};
  for (int i = 0; i < 3; ++i) w.data<float>()[i] = ws[i], g.data<float>()[i] = gs[i];
  auto lion = make_lion(*be, w, g, LionOptions{.betas = {0.9, 0.99}, .weight_decay = 0.5}, {});
  lion->step(0.1f);
  CHECK(w.data<float>()[0] == doctest::Approx(1.0 * (1 - 0.05) - 0.1));  // the size ignored
  CHECK(w.data<float>()[1] == doctest::Approx(1.0 * (1 - 0.05) + 0.1));
  CHECK(w.data<float>()[2] == doctest::Approx(2.0 * (1 - 0.05)));  // no gradient: decay alone
  CHECK(g.data<float>()[0] == 4.0f);                               // gradients unchanged
}

TEST_CASE("Lion's state is one moment, \"m\": half of AdamW's, restored by name bit for bit") {
  Model a, b;
  const LionOptions o{};
  auto lion = make_lion(*a.backend, a.w, a.g, o, a.ranges);
  auto adamw = make_adamw(*a.backend, a.w, a.g, AdamWOptions{}, a.ranges);
  int64_t lion_bytes = 0, adamw_bytes = 0;
  for (const auto& [name, buffer] : lion->state_buffers()) lion_bytes += buffer.bytes();
  for (const auto& [name, buffer] : adamw->state_buffers()) adamw_bytes += buffer.bytes();
  CHECK(lion_bytes == 9 * 4);
  CHECK(2 * lion_bytes == adamw_bytes);
  REQUIRE(lion->state_buffers().size() == 1);
  CHECK(lion->state_buffers()[0].first == "m");
  CHECK(lion->counters().empty());  // no bias correction, no step count

  for (int step = 0; step < 3; ++step) a.gradient(step), lion->step(1e-2f);
  b.backend->copy(b.w, a.w);
  auto resumed = make_lion(*b.backend, b.w, b.g, o, b.ranges);
  b.backend->copy(resumed->state_buffers()[0].second, lion->state_buffers()[0].second);
  for (int step = 3; step < 6; ++step) {
    a.gradient(step), b.gradient(step);
    lion->step(1e-2f);
    resumed->step(1e-2f);
  }
  for (int i = 0; i < 9; ++i) CHECK(a.w.data<float>()[i] == b.w.data<float>()[i]);
}

TEST_CASE("the lion row: its keys, defaults and factory") {
  const OptimizerEntry* row = find_optimizer("lion");
  REQUIRE(row != nullptr);
  CHECK(row->keys->keys() == std::vector<std::string>{"betas", "weight_decay"});
  const OptimizerChoice choice("lion");
  CHECK(choice.get<LionOptions>().betas == std::vector<double>{0.9, 0.99});
  CHECK(choice.get<LionOptions>().weight_decay == 0.0);
  Model model;
  auto lion = make_optimizer(choice, *model.backend, model.w, model.g, model.ranges);
  CHECK(lion->name() == "lion");
  CHECK(lion->prediction() != nullptr);  // SAPipe's weight prediction comes with the rule
}
