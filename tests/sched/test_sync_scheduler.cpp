// The sync scheduler on one rank: it learns, it is bit-reproducible for a seed (whatever the
// thread count), and its timing parts add up.
#include <doctest/doctest.h>

#include <yaml-cpp/yaml.h>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "comm/comm.h"
#include "run/config.h"
#include "run/run_builder.h"

using namespace dtrain;

namespace {

// A one-rank run assembled by the run builder, as training assembles it.
struct OneRank {
  std::unique_ptr<Comm> comm = make_local_comm();
  std::unique_ptr<Run> run;
  std::unique_ptr<Scheduler> sched;
  Loader* loader;
  Model* model;

  OneRank(uint64_t seed, int threads, const char* model_yaml) {
    run = build_run(parse_config(fmt::format(R"(seed: {}
model: {}
dataset: {{name: synthetic, shape: [3, 8, 8], classes: 4, train_size: 256, test_size: 64,
          batch_size: 32}}
cluster: {{device: cpu, threads_per_rank: {}}}
optimizer: {{lr: 0.05, momentum: 0.9, weight_decay: 0.0001}}
)",
                                             seed, model_yaml, threads),
                                 "one_rank.yaml"),
                    {0, 1, 0, false});
    sched = build_scheduler(*run, *comm, {});
    loader = run->train_loader.get();
    model = run->model.get();
  }
  EpochStats epoch(int e) {
    loader->start_epoch(e);
    return sched->run_epoch(*loader, e, 0);
  }
};

const char* kConvNet = R"({layers: [
  {name: c1, type: conv2d, out_channels: 8, kernel: 3, padding: 1},
  {name: bn, type: batchnorm2d}, {name: r1, type: relu},
  {name: p1, type: maxpool2d, kernel: 2, stride: 2},
  {name: d, type: dropout, p: 0.2},
  {name: f, type: flatten}, {name: fc, type: linear, out_features: 4}]})";

}  // namespace

// Across thread counts oneDNN splits its reductions differently, so only rounding may differ.
TEST_CASE("same seed, same weights bit for bit after several epochs") {
  OneRank a(7, 1, kConvNet), b(7, 1, kConvNet), c(7, 2, kConvNet);
  for (int e = 0; e < 3; ++e) a.epoch(e), b.epoch(e), c.epoch(e);
  const Tensor& wa = a.model->parameters();
  CHECK(std::memcmp(wa.raw(), b.model->parameters().raw(), wa.bytes()) == 0);
  double max_diff = 0;
  for (int64_t i = 0; i < wa.numel(); ++i)
    max_diff = std::max<double>(
        max_diff, std::abs(wa.data<float>()[i] - c.model->parameters().data<float>()[i]));
  CHECK(max_diff < 1e-3);
  OneRank d(8, 1, kConvNet);
  for (int e = 0; e < 3; ++e) d.epoch(e);
  CHECK(std::memcmp(wa.raw(), d.model->parameters().raw(), wa.bytes()) != 0);
}

TEST_CASE("sync training lowers the loss and accounts for its time") {
  OneRank r(3, 1, "{name: mlp, hidden: [32]}");
  EpochStats first = r.epoch(0);
  EpochStats last;
  for (int e = 1; e < 6; ++e) last = r.epoch(e);
  CHECK(first.iterations == 8);
  CHECK(last.loss_sum / last.samples < 0.7 * first.loss_sum / first.samples);
  CHECK(last.phases.total() <= last.wall_s);
  CHECK(last.phases[Phase::forward] > 0);
}

TEST_CASE("max_iterations stops inside an epoch") {
  OneRank r(3, 1, "{name: mlp, hidden: [16]}");
  r.loader->start_epoch(0);
  CHECK(r.sched->run_epoch(*r.loader, 0, 3).iterations == 3);
}
