// SAPipe on a quadratic f(w) = a·w²/2 with η·a ∈ (1, 2), one rank: plain SGD converges
// (w ← (1 − ηa)·w), Pipe-SGD's delayed gradient diverges (w_{t+1} = w_t − ηa·w_{t−1}, whose
// roots have modulus √(ηa) > 1), and SAPipe with weight prediction from the rank's own gradient
// (wp1) converges: on one rank it is SGD. The schedulers run as in training, on a model whose
// only parameter has the quadratic's gradient.
#include <doctest/doctest.h>

#include <cmath>
#include <span>

#include "../trainee.h"
#include "nn/graph.h"
#include "nn/layer.h"
#include "optim/sgd.h"  // make_sgd
#include "sched/pipe_sgd_scheduler.h"
#include "sched/sapipe/sapipe_scheduler.h"
#include "sched/sync_scheduler.h"

using namespace dtrain;
using test::Trainee;
using test::TraineeOptions;

namespace {

// One parameter w whose gradient is a·w, whatever the batch; its logits are zeros (a constant
// loss), so nothing else moves.
class Quadratic final : public Layer {
 public:
  explicit Quadratic(float a) : a_(a) {}
  std::string_view type() const override { return "quadratic"; }
  Shape infer(const std::string&, std::span<const InputInfo> inputs) override {
    return Shape{inputs[0].shape[0], 3};
  }
  std::vector<ParamDecl> params() const override {
    return {{"weight", Shape{1}, {ParamInit::Kind::constant, 1.0f}}};
  }
  void bind(std::span<const Tensor> params, std::span<const Tensor> grads,
            std::span<const Tensor>) override {
    w_ = params[0];
    g_ = grads[0];
  }
  void prepare(Backend&, int64_t) override {}
  void forward(const RunContext& ctx, std::span<const Tensor>, const Tensor& y) override {
    ctx.backend->fill_zero(y);
  }
  void backward(const RunContext&, std::span<const Tensor>, const Tensor&, const Tensor&,
                std::span<const Tensor>, bool weights) override {
    if (weights) g_.data<float>()[0] = a_ * w_.data<float>()[0];
  }

 private:
  float a_;
  Tensor w_, g_;
};

constexpr float kA = 1.0f, kLr = 1.5f;  // η·a = 1.5

// |w| after `epochs` epochs of `make`'s scheduler, starting from w = 1.
template <class Make>
double final_w(Make make, int epochs) {
  auto comm = make_local_comm();
  TraineeOptions o;
  o.shape = "[3, 1, 1]";
  Trainee data(*comm, o);  // for its loader: 20 batches per epoch
  std::vector<GraphNode> nodes;
  nodes.push_back({"quad", std::make_unique<Quadratic>(kA), {}});
  auto graph = std::make_unique<Graph>(std::move(nodes), Shape{24, 3, 1, 1});
  graph->materialize(*data.backend, 1);
  Model model(std::move(graph), {Shape{3, 1, 1}, 3, 24});
  auto sgd =
      make_sgd(*data.backend, model.parameters(), model.gradients(), SgdOptions{0, 0, 0, false});
  LrScheduleOptions constant;
  constant.base_lr = kLr;
  LrSchedule schedule(constant);
  SchedulerContext ctx{model, *sgd, schedule, *comm, 20, {}};
  std::unique_ptr<Scheduler> s = make(ctx);
  for (int e = 0; e < epochs; ++e) {
    data.loader->start_epoch(e);
    s->run_epoch(*data.loader, e, 0);
  }
  s->flush();
  return std::abs(model.parameters().data<float>()[0]);
}

}  // namespace

TEST_CASE("a quadratic where pipe_sgd diverges and sapipe with wp1 converges, on one rank") {
  const double sgd = final_w(
      [](SchedulerContext ctx) { return std::make_unique<SyncScheduler>(ctx, SyncOptions{}); }, 2);
  const double pipe = final_w(
      [](SchedulerContext ctx) {
        return std::make_unique<PipeSgdScheduler>(ctx, PipeSgdOptions{2, 0, 1});
      },
      2);
  auto sapipe = [](const char* compensation) {
    return [compensation](SchedulerContext ctx) {
      SapipeOptions o;
      o.stale_layers = config::WordOr<int>::named("all");
      o.compensation = compensation;
      return std::make_unique<SapipeScheduler>(ctx, o);
    };
  };
  const double none = final_w(sapipe("none"), 2), wp1 = final_w(sapipe("wp1"), 2);
  // 40 steps: SGD shrinks w by 0.5 per step, the delayed gradient grows it by about √1.5.
  CHECK(sgd < 1e-9);
  CHECK(pipe > 1e3);
  CHECK(none == pipe);  // all layers stale, uncompensated: Pipe-SGD
  CHECK(wp1 == sgd);
}
