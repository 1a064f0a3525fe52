#include <doctest/doctest.h>

#include "optim/lr_schedule.h"

using namespace dtrain;

TEST_CASE("step, multistep, cosine and warm-up") {
  LrSchedule step({"step", 1.0, 30, 0.1});
  CHECK(step.lr_at(0) == doctest::Approx(1.0));
  CHECK(step.lr_at(29.9) == doctest::Approx(1.0));
  CHECK(step.lr_at(30) == doctest::Approx(0.1));
  CHECK(step.lr_at(65) == doctest::Approx(0.01));

  LrScheduleOptions m{"multistep", 1.0};
  m.milestones = {2, 5};
  m.gamma = 0.5;
  LrSchedule multi(m);
  CHECK(multi.lr_at(1.5) == doctest::Approx(1.0));
  CHECK(multi.lr_at(2) == doctest::Approx(0.5));
  CHECK(multi.lr_at(7) == doctest::Approx(0.25));

  LrScheduleOptions c{"cosine", 1.0};
  c.total_epochs = 10;
  c.min_lr = 0.1;
  LrSchedule cosine(c);
  CHECK(cosine.lr_at(0) == doctest::Approx(1.0));
  CHECK(cosine.lr_at(5) == doctest::Approx(0.55));
  CHECK(cosine.lr_at(10) == doctest::Approx(0.1));

  LrScheduleOptions w{"constant", 1.0};
  w.warmup_epochs = 2;
  w.warmup_start_factor = 0.1;
  LrSchedule warm(w);
  CHECK(warm.lr_at(0) == doctest::Approx(0.1));
  CHECK(warm.lr_at(1) == doctest::Approx(0.55));
  CHECK(warm.lr_at(2) == doctest::Approx(1.0));
}
