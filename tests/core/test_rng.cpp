#include <doctest/doctest.h>

#include <cmath>

#include "core/rng.h"

using namespace dtrain;

TEST_CASE("counter-based rng is a pure function of seed, stream and index") {
  CHECK(random_bits(1, 2, 3) == random_bits(1, 2, 3));
  CHECK(random_bits(1, 2, 3) != random_bits(1, 2, 4));
  CHECK(random_bits(1, 2, 3) != random_bits(2, 2, 3));
  CHECK(random_bits(1, 2, 3) != random_bits(1, 3, 3));
}

TEST_CASE("uniform and normal have the expected moments") {
  const int n = 200000;
  double su = 0, sn = 0, sn2 = 0;
  for (int i = 0; i < n; ++i) {
    float u = random_uniform(7, 1, i);
    CHECK_UNARY(u >= 0.0f);
    CHECK_UNARY(u < 1.0f);
    su += u;
    double z = random_normal(7, 2, i);
    sn += z;
    sn2 += z * z;
  }
  CHECK(su / n == doctest::Approx(0.5).epsilon(0.01));
  CHECK(std::abs(sn / n) < 0.01);
  CHECK(sn2 / n == doctest::Approx(1.0).epsilon(0.02));
}
