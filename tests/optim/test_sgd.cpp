#include <doctest/doctest.h>

#include "optim/sgd.h"

using namespace dtrain;

namespace {
struct Buffers {
  std::unique_ptr<Backend> backend = make_backend({DeviceChoice::cpu, 1, 0});
  Tensor w = backend->empty({4}), g = backend->empty({4});
  Buffers() {
    for (int i = 0; i < 4; ++i) w.data<float>()[i] = 1.0f + i, g.data<float>()[i] = 0.5f;
  }
};
}  // namespace

TEST_CASE("momentum SGD over three steps equals the hand-computed sequence") {
  Buffers b;
  auto sgd = make_sgd(*b.backend, b.w, b.g, SgdOptions{0.9f, 0.0f, 0.0f, false});
  // v1 = 0.5, w1 = 1 − 0.05 = 0.95; v2 = 0.95, w2 = 0.855; v3 = 1.355, w3 = 0.7195
  sgd->step(0.1f);
  CHECK(b.w.data<float>()[0] == doctest::Approx(0.95));
  sgd->step(0.1f);
  CHECK(b.w.data<float>()[0] == doctest::Approx(0.855));
  sgd->step(0.1f);
  CHECK(b.w.data<float>()[0] == doctest::Approx(0.7195));
  const auto state = sgd->state_buffers();
  REQUIRE(state.size() == 1);
  CHECK(state[0].first == "momentum");
  CHECK(state[0].second.data<float>()[0] == doctest::Approx(1.355));
}

TEST_CASE("weight decay and dampening") {
  Buffers b;
  auto sgd = make_sgd(*b.backend, b.w, b.g, SgdOptions{0.5f, 0.5f, 0.1f, false});
  sgd->step(1.0f);
  // w[1] = 2: g' = 0.5 + 0.2 = 0.7; v = 0.5·0.7 = 0.35; w = 1.65
  CHECK(b.w.data<float>()[1] == doctest::Approx(1.65));
}

TEST_CASE("a frozen prefix is never updated; step_range updates only its segment") {
  Buffers b;
  auto sgd = make_sgd(*b.backend, b.w, b.g, SgdOptions{0.0f}, 2);
  sgd->step(1.0f);
  CHECK(b.w.data<float>()[0] == 1.0f);
  CHECK(b.w.data<float>()[1] == 2.0f);
  CHECK(b.w.data<float>()[2] == doctest::Approx(2.5));
  sgd->step_range(1.0f, 0, 3);  // clipped to [2, 3)
  CHECK(b.w.data<float>()[1] == 2.0f);
  CHECK(b.w.data<float>()[2] == doctest::Approx(2.0));
  CHECK(b.w.data<float>()[3] == doctest::Approx(3.5));
}

TEST_CASE("Nesterov without momentum is rejected") {
  Buffers b;
  CHECK_THROWS(make_sgd(*b.backend, b.w, b.g, SgdOptions{0.0f, 0.0f, 0.0f, true}));
}
