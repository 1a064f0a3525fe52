// The sync scheduler on one rank: it learns, it is bit-reproducible for a seed (whatever the
// thread count), and its timing parts add up.
#include <doctest/doctest.h>

#include <yaml-cpp/yaml.h>
#include <cmath>
#include <cstring>

#include "comm/comm.h"
#include "sched/sync_scheduler.h"

using namespace dtrain;

namespace {

struct Run {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Dataset> data;
  std::unique_ptr<Loader> loader;
  std::unique_ptr<Model> model;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<Sgd> sgd;
  std::unique_ptr<Comm> comm = make_local_comm();
  std::unique_ptr<SyncScheduler> sched;

  Run(uint64_t seed, int threads, const char* model_yaml) {
    backend = make_backend({DeviceChoice::cpu, threads, 0});
    DatasetOptions d;
    d.name = "synthetic";
    d.shape = {3, 8, 8};
    d.classes = 4;
    d.train_size = 256;
    d.test_size = 64;
    d.seed = seed;
    data = open_dataset(d, Split::train);
    LoaderOptions lo;
    lo.global_batch = 32;
    lo.seed = seed;
    loader = std::make_unique<Loader>(*data, lo);
    std::vector<std::string> problems;
    YAML::Node spec = check_model_spec(YAML::Load(model_yaml), problems);
    REQUIRE(problems.empty());
    model = build_model(*backend, spec, {data->sample_shape(), 4, 32}, seed);
    LrScheduleOptions lr;
    lr.base_lr = 0.05;
    schedule = std::make_unique<LrSchedule>(lr);
    sgd = std::make_unique<Sgd>(*backend, model->parameters(), model->gradients(),
                                SgdOptions{0.9f, 0.0f, 1e-4f, false});
    sched = std::make_unique<SyncScheduler>(
        SchedulerContext{*model, *sgd, *schedule, *comm, loader->batches_per_epoch(), {}});
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
  Run a(7, 1, kConvNet), b(7, 1, kConvNet), c(7, 2, kConvNet);
  for (int e = 0; e < 3; ++e) a.epoch(e), b.epoch(e), c.epoch(e);
  const Tensor& wa = a.model->parameters();
  CHECK(std::memcmp(wa.raw(), b.model->parameters().raw(), wa.bytes()) == 0);
  double max_diff = 0;
  for (int64_t i = 0; i < wa.numel(); ++i)
    max_diff = std::max<double>(
        max_diff, std::abs(wa.data<float>()[i] - c.model->parameters().data<float>()[i]));
  CHECK(max_diff < 1e-3);
  Run d(8, 1, kConvNet);
  for (int e = 0; e < 3; ++e) d.epoch(e);
  CHECK(std::memcmp(wa.raw(), d.model->parameters().raw(), wa.bytes()) != 0);
}

TEST_CASE("sync training lowers the loss and accounts for its time") {
  Run r(3, 1, "{name: mlp, hidden: [32]}");
  EpochStats first = r.epoch(0);
  EpochStats last;
  for (int e = 1; e < 6; ++e) last = r.epoch(e);
  CHECK(first.iterations == 8);
  CHECK(last.loss_sum / last.samples < 0.7 * first.loss_sum / first.samples);
  const double parts = last.data_s + last.forward_s + last.backward_s + last.update_s +
                       last.compress_s + last.comm_s + last.wait_s;
  CHECK(parts <= last.wall_s);
  CHECK(last.forward_s > 0);
}

TEST_CASE("max_iterations stops inside an epoch") {
  Run r(3, 1, "{name: mlp, hidden: [16]}");
  r.loader->start_epoch(0);
  CHECK(r.sched->run_epoch(*r.loader, 0, 3).iterations == 3);
}
