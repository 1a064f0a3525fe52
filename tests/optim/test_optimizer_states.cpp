// Each optimizer row names the state buffers its options keep: what the memory model counts.
#include <doctest/doctest.h>

#include "optim/optimizer_table.h"
#include "optim/sgd.h"  // SgdOptions

using namespace dtrain;

TEST_CASE("state floats per parameter come from the rows") {
  CHECK(optimizer_state_floats(OptimizerChoice("adamw")) == 2);
  CHECK(optimizer_state_floats(OptimizerChoice("lion")) == 1);
  OptimizerChoice sgd("sgd");
  sgd.get<SgdOptions>().momentum = 0.9;
  CHECK(optimizer_state_floats(sgd) == 1);
  sgd.get<SgdOptions>().momentum = 0;
  CHECK(optimizer_state_floats(sgd) == 0);
  for (const OptimizerEntry& row : optimizers()) CHECK_MESSAGE(row.states, row.name);
}
