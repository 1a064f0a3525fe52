#include <doctest/doctest.h>

#include "core/error.h"
#include "core/tensor.h"

using namespace dtrain;

TEST_CASE("shape reports element count and string form") {
  Shape s{2, 3, 4};
  CHECK(s.numel() == 24);
  CHECK(s.rank() == 3);
  CHECK(s[-1] == 4);
  CHECK(s.str() == "[2, 3, 4]");
  CHECK(s.with_batch(5) == Shape{5, 3, 4});
  CHECK(s.inner() == Shape{3, 4});
}

TEST_CASE("tensor slices share storage") {
  Tensor t = Tensor::zeros({10});
  Tensor v = t.slice(4, {2, 3});
  v.data<float>()[0] = 7.0f;
  CHECK(t.data<float>()[4] == 7.0f);
  CHECK(reinterpret_cast<uintptr_t>(t.raw()) % 64 == 0);
  CHECK_THROWS_AS(t.slice(8, {3}), Error);
  CHECK_THROWS_AS(t.reshape({3, 3}), Error);
  CHECK(t.reshape({2, 5}).shape() == Shape{2, 5});
}

TEST_CASE("checks carry file and line, input checks only the message") {
  try {
    DTRAIN_CHECK(1 == 2) << "because " << 42;
    FAIL("no throw");
  } catch (const InputError&) {
    FAIL("wrong kind");
  } catch (const Error& e) {
    std::string what = e.what();
    CHECK(what.find("test_tensor.cpp") != std::string::npos);
    CHECK(what.find("because 42") != std::string::npos);
  }
  try {
    DTRAIN_INPUT_CHECK(false) << "dataset.batch_size: must be positive";
    FAIL("no throw");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "dataset.batch_size: must be positive");
  }
}

TEST_CASE("a default tensor is undefined and empty") {
  Tensor t;
  CHECK_FALSE(t.defined());
  CHECK(t.numel() == 0);
  CHECK(t.bytes() == 0);
  CHECK(Tensor::zeros({0, 3}).defined());
}
