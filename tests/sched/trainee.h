// A small data-parallel training set-up for scheduler tests: synthetic data (deterministic
// order for a seed), an MLP, momentum SGD with weight decay, and one scheduler on a Comm.
#pragma once
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "sched/pipe_sgd_scheduler.h"
#include "sched/ps_sync_scheduler.h"
#include "sched/sync_scheduler.h"

namespace dtrain::test {

constexpr float kMomentum = 0.9f, kWeightDecay = 1e-4f, kLr = 0.1f;

struct TraineeOptions {
  std::string algorithm = "sync";  // sync | ps_sync | pipe_sgd
  std::string compression = "none";
  PipelineOptions pipeline = {};
  int64_t global_batch = 24;  // divisible by 1, 2, 3, 4
  int64_t train_size = 480;
  DeviceChoice device = DeviceChoice::cpu;  // cuda: GPU local_rank (tests/sched GPU tests)
};

struct Trainee {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Dataset> data;
  std::unique_ptr<Loader> loader;
  std::unique_ptr<Model> model;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<Sgd> sgd;
  std::unique_ptr<Scheduler> sched;

  Trainee(Comm& comm, const TraineeOptions& o)
      : backend(make_backend({o.device, 1, comm.local_rank(), false, false})) {
    DatasetOptions d;
    d.name = "synthetic";
    d.shape = {1, 6, 6};
    d.classes = 3;
    d.train_size = o.train_size;
    data = open_dataset(d, Split::train);
    LoaderOptions lo;
    lo.global_batch = o.global_batch;
    lo.rank = comm.rank();
    lo.world = comm.size();
    loader = std::make_unique<Loader>(*data, lo);
    std::vector<std::string> problems;
    YAML::Node spec = check_model_spec(YAML::Load("{name: mlp, hidden: [16]}"), problems);
    model = build_model(*backend, spec, {data->sample_shape(), 3, loader->local_batch()}, 5);
    LrScheduleOptions lr;
    lr.base_lr = kLr;
    schedule = std::make_unique<LrSchedule>(lr);
    sgd = std::make_unique<Sgd>(*backend, model->parameters(), model->gradients(),
                                SgdOptions{kMomentum, 0.0f, kWeightDecay, false});
    SchedulerContext ctx{*model, *sgd,         *schedule, comm, loader->batches_per_epoch(),
                         {},     o.compression};
    ctx.pipeline = o.pipeline;
    if (o.algorithm == "sync")
      sched = std::make_unique<SyncScheduler>(std::move(ctx));
    else if (o.algorithm == "ps_sync")
      sched = std::make_unique<PsSyncScheduler>(std::move(ctx));
    else
      sched = std::make_unique<PipeSgdScheduler>(std::move(ctx));
  }
  // `iterations` more iterations of `epoch` (0: to its end), continuing the loader's epoch.
  EpochStats train(int epoch, int iterations) {
    return sched->run_epoch(*loader, epoch, iterations);
  }
  void start_epoch(int epoch) { loader->start_epoch(epoch); }
  const float* weights() const { return model->parameters().data<float>(); }  // CPU only
  // The weights in host memory, wherever they live.
  std::vector<float> host_weights() const {
    std::vector<float> w(static_cast<size_t>(size()));
    backend->copy(Tensor::borrow(w.data(), Shape{size()}), model->parameters());
    backend->synchronize();
    return w;
  }
  int64_t size() const { return model->num_parameters(); }
};

// Largest absolute difference between two weight vectors.
inline double max_difference(const float* a, const float* b, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  return worst;
}

}  // namespace dtrain::test
