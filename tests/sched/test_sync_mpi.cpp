// Data-parallel equivalence (issue 4): `sync` on p ranks with global batch B gives the same
// weights, to float tolerance, as one rank with batch B on the same data order — with the
// ring all-reduce (truncate16 excluded: lossy) and with MPI_Allreduce; the same for ps_sync.
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>

#include "comm/mpi_comm.h"
#include "sched/ps_sync_scheduler.h"
#include "sched/sync_scheduler.h"

using namespace dtrain;

namespace {

struct Trainee {
  std::unique_ptr<Backend> backend = make_backend({DeviceChoice::cpu, 1, 0});
  std::unique_ptr<Dataset> data;
  std::unique_ptr<Loader> loader;
  std::unique_ptr<Model> model;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<Sgd> sgd;
  std::unique_ptr<Scheduler> sched;

  Trainee(Comm& comm, const std::string& compression, const std::string& algorithm = "sync") {
    DatasetOptions d;
    d.name = "synthetic";
    d.shape = {1, 6, 6};
    d.classes = 3;
    d.train_size = 480;
    data = open_dataset(d, Split::train);
    LoaderOptions lo;
    lo.global_batch = 24;  // divisible by 1, 2, 3, 4
    lo.rank = comm.rank();
    lo.world = comm.size();
    loader = std::make_unique<Loader>(*data, lo);
    std::vector<std::string> problems;
    YAML::Node spec = check_model_spec(YAML::Load("{name: mlp, hidden: [16]}"), problems);
    model = build_model(*backend, spec, {data->sample_shape(), 3, loader->local_batch()}, 5);
    LrScheduleOptions lr;
    lr.base_lr = 0.1;
    schedule = std::make_unique<LrSchedule>(lr);
    sgd = std::make_unique<Sgd>(*backend, model->parameters(), model->gradients(),
                                SgdOptions{0.9f, 0.0f, 1e-4f, false});
    SchedulerContext ctx{*model, *sgd,       *schedule, comm, loader->batches_per_epoch(),
                         {},     compression};
    if (algorithm == "sync")
      sched = std::make_unique<SyncScheduler>(std::move(ctx));
    else
      sched = std::make_unique<PsSyncScheduler>(std::move(ctx));
  }
  void train(int iterations) {
    loader->start_epoch(0);
    sched->run_epoch(*loader, 0, iterations);
  }
};

}  // namespace

TEST_CASE("sync and ps_sync on p ranks equal one rank with the same global batch") {
  auto world = make_mpi_comm();
  auto local = make_local_comm();
  for (const char* algorithm : {"sync", "ps_sync"})
    for (const char* compression : {"none", "quantize8"}) {
      CAPTURE(algorithm);
      CAPTURE(compression);
      Trainee parallel(*world, compression, algorithm);
      parallel.train(12);
      // Every rank holds the same weights.
      const Tensor& w = parallel.model->parameters();
      std::vector<double> sum{0.0};
      for (int64_t i = 0; i < w.numel(); ++i) sum[0] += w.data<float>()[i] * (1 + i % 7);
      const double mine = sum[0];
      world->allreduce_sum(sum);
      CHECK(sum[0] == doctest::Approx(mine * world->size()).epsilon(1e-12));
      if (std::string(compression) != "none") continue;  // lossy: not equal to one rank
      Trainee single(*local, "none");
      single.train(12);
      double worst = 0;
      for (int64_t i = 0; i < w.numel(); ++i)
        worst = std::max(worst, double(std::abs(w.data<float>()[i] -
                                                single.model->parameters().data<float>()[i])));
      CHECK(worst < 1e-4);
    }
}
