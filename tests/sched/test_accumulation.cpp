// Gradient accumulation (train.accumulation_steps N): N micro-batches of a step give the update
// of the whole batch in one, to float rounding, for the schedulers that compute through
// Scheduler::compute_gradients; on_ready reports each range once per step, only when its sum is
// complete; the step's loss statistics count all its samples; Pipe-SGD's K counts steps.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "comm/comm.h"
#include "nn/graph.h"  // the build batch
#include "trainee.h"

using namespace dtrain;

using test::Trainee;
using test::TraineeOptions;

namespace {

// The largest difference between two weight vectors relative to the largest weight.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, largest = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
    largest = std::max(largest, static_cast<double>(std::abs(b[i])));
  }
  return worst / largest;
}

struct Trained {
  std::vector<float> weights;
  EpochStats stats;
};

Trained train(Comm& comm, TraineeOptions o, int steps, int iterations) {
  o.accumulation_steps = steps;
  Trainee t(comm, o);
  t.start_epoch(0);
  Trained r;
  r.stats = t.train(0, iterations);
  r.weights = t.host_weights();
  return r;
}

// A scheduler that only computes gradients: compute_gradients as the algorithms call it.
class GradientProbe final : public Scheduler {
 public:
  using Scheduler::Scheduler;
  std::string name() const override { return "probe"; }
  EpochStats run_epoch(Loader&, const EpochPart&) override { return {}; }
  void gradients(const Batch& batch, EpochStats& stats,
                 const std::function<void(int64_t)>& on_ready) {
    compute_gradients(batch, stats, on_ready);
  }
};

}  // namespace

TEST_CASE("sync: N micro-batches a step give the whole batch's update (MLP, momentum SGD)") {
  auto local = make_local_comm();
  TraineeOptions o;  // global batch 24: micro-batches of 12 and 6
  const Trained whole = train(*local, o, 1, 6);
  for (int steps : {2, 4}) {
    CAPTURE(steps);
    const Trained accumulated = train(*local, o, steps, 6);
    CHECK(relative_difference(accumulated.weights, whole.weights) < 1e-6);
    // The statistics are the whole steps': every sample once, the same loss.
    CHECK(accumulated.stats.iterations == 6);
    CHECK(accumulated.stats.samples == whole.stats.samples);
    CHECK(accumulated.stats.samples == 6 * 24);
    CHECK(accumulated.stats.loss_sum == doctest::Approx(whole.stats.loss_sum).epsilon(1e-6));
    CHECK(accumulated.stats.correct == whole.stats.correct);
  }
}

TEST_CASE("sync: accumulation with AdamW and a clipped gradient equals the whole batch") {
  auto local = make_local_comm();
  TraineeOptions o;
  o.optimizer = "adamw";
  o.lr = 0.01f;
  o.weight_decay = 0.1f;
  // eps well above the float noise of a near-zero gradient, whose sign AdamW's first steps
  // would otherwise amplify to a whole lr.
  o.optimizer_keys = "eps: 1e-3, clip_grad_norm: 0.05";
  const Trained whole = train(*local, o, 1, 6);
  const Trained accumulated = train(*local, o, 3, 6);
  CHECK(relative_difference(accumulated.weights, whole.weights) < 1e-6);
}

TEST_CASE("the algorithms that compute through compute_gradients accumulate") {
  auto local = make_local_comm();
  for (const std::string algorithm : {"ps_sync", "local_sgd", "d_psgd", "gossip"}) {
    CAPTURE(algorithm);
    TraineeOptions o;
    o.algorithm = algorithm;
    const Trained whole = train(*local, o, 1, 5);
    const Trained accumulated = train(*local, o, 2, 5);
    CHECK(relative_difference(accumulated.weights, whole.weights) < 1e-6);
    CHECK(accumulated.stats.samples == whole.stats.samples);
  }
}

TEST_CASE("pipe_sgd: K counts optimizer steps; accumulated runs repeat bit for bit") {
  auto local = make_local_comm();
  TraineeOptions o;
  o.algorithm = "pipe_sgd";
  o.keys = "K: 2";
  const Trained whole = train(*local, o, 1, 7);
  const Trained first = train(*local, o, 2, 7);
  const Trained again = train(*local, o, 2, 7);
  CHECK(first.weights == again.weights);
  // The gradient applied at step t is step t − 2's whole gradient, not a micro-batch's.
  CHECK(relative_difference(first.weights, whole.weights) < 1e-6);
}

TEST_CASE("on_ready fires once per range, in the last micro-batch, with the summed gradient") {
  auto local = make_local_comm();
  const TraineeOptions o;
  auto run_of = [&](int steps) {
    TraineeOptions with = o;
    with.accumulation_steps = steps;
    return build_run(parse_config(test::trainee_yaml(with), "trainee.yaml"), {0, 1, 0, false});
  };
  auto whole_run = run_of(1), accumulated_run = run_of(4);
  // The model is built for the micro-batch: 24 rows a step in 4 micro-batches of 6.
  CHECK(whole_run->model->graph().input_shape()[0] == 24);
  CHECK(accumulated_run->model->graph().input_shape()[0] == 6);
  Batch batch;
  whole_run->train_loader->start_epoch(0);
  REQUIRE(whole_run->train_loader->next(batch));

  // Each call: the offset, and gradients[offset, P) as they are at that moment.
  struct Ready {
    int64_t offset;
    std::vector<float> final_part;
  };
  auto probe = [&](Run& run, int steps) {
    SchedulerContext ctx{.model = *run.model,
                         .optimizer = *run.optimizer,
                         .schedule = *run.schedule,
                         .comm = *local,
                         .on_iteration = {},
                         .accumulation_steps = steps};
    GradientProbe p(std::move(ctx));
    std::vector<Ready> calls;
    const Tensor& g = run.model->gradients();
    EpochStats stats;
    p.gradients(batch, stats, [&](int64_t offset) {
      const float* data = g.data<float>();
      calls.push_back({offset, std::vector<float>(data + offset, data + g.numel())});
    });
    CHECK(run.model->last_stats().count == 24);  // the whole batch's statistics
    return calls;
  };
  const std::vector<Ready> whole = probe(*whole_run, 1);
  const std::vector<Ready> accumulated = probe(*accumulated_run, 4);
  REQUIRE(accumulated.size() == whole.size());  // one report per range per step
  for (size_t k = 0; k < whole.size(); ++k) {
    CAPTURE(k);
    CHECK(accumulated[k].offset == whole[k].offset);
    // What a report hands over is already the step's gradient of that range.
    double worst = 0, largest = 0;
    for (size_t e = 0; e < whole[k].final_part.size(); ++e) {
      worst =
          std::max(worst, double(std::abs(accumulated[k].final_part[e] - whole[k].final_part[e])));
      largest = std::max(largest, double(std::abs(whole[k].final_part[e])));
    }
    CHECK(worst <= 1e-5 * largest);
  }
}
