#include "run/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/timer.h"
#include "run/consistency.h"           // check_consistency
#include "run/metrics.h"               // MetricsWriter
#include "run/progress.h"              // Progress
#include "run/run_options.h"           // config → module options
#include "sched/pipe_sgd_scheduler.h"  // PipeSgdScheduler
#include "sched/ps_sync_scheduler.h"   // PsSyncScheduler
#include "sched/sync_scheduler.h"      // SyncScheduler

namespace dtrain {
namespace {

std::unique_ptr<Scheduler> make_scheduler(const AlgorithmConfig& a, SchedulerContext ctx) {
  if (a.name == "sync") return std::make_unique<SyncScheduler>(std::move(ctx));
  if (a.name == "ps_sync") return std::make_unique<PsSyncScheduler>(std::move(ctx));
  if (a.name == "pipe_sgd") return std::make_unique<PipeSgdScheduler>(std::move(ctx));
  throw InputError("algorithm.name: '" + a.name +
                   "' is not available in this build yet (available: sync, ps_sync, pipe_sgd)");
}

// The slow-down cluster.stragglers gives this rank (1 when it is not listed).
double compute_slowdown(const ClusterConfig& cluster, const Comm& comm) {
  double slowdown = 1.0;
  for (size_t i = 0; i < cluster.stragglers.size(); ++i) {
    const StragglerConfig& s = cluster.stragglers[i];
    DTRAIN_INPUT_CHECK(s.rank < comm.size()) << "cluster.stragglers[" << i << "].rank: " << s.rank
                                             << ", but the job has " << comm.size() << " rank(s)";
    if (s.rank == comm.rank()) slowdown = s.slowdown;
  }
  return slowdown;
}

}  // namespace

Trainer::Trainer(const ExperimentConfig& config, Comm& comm) : config_(config), comm_(comm) {
  const int world = comm_.size();
  DTRAIN_INPUT_CHECK(config_.dataset.batch_size % world == 0)
      << "dataset.batch_size: the global batch " << config_.dataset.batch_size
      << " must be divisible by the " << world << " data-parallel ranks";
  backend_ = make_backend(backend_options(config_, comm_.local_rank(), comm_.rank() == 0));

  const DatasetOptions data = dataset_options(config_);
  train_set_ = open_dataset(data, Split::train);
  test_set_ = open_dataset(data, Split::test);
  // Batches in the backend's host memory (pinned for a GPU), uploaded to a GPU by the loaders'
  // threads while the compute stream works.
  LoaderOptions train_options = train_loader_options(config_, comm_);
  LoaderOptions test_options = test_loader_options(config_, comm_);
  train_options.allocator = test_options.allocator = &backend_->host_allocator();
  train_options.device = test_options.device = backend_.get();
  train_loader_ = std::make_unique<Loader>(*train_set_, train_options);
  test_loader_ = std::make_unique<Loader>(*test_set_, test_options);

  ModelInput input{train_set_->sample_shape(), train_set_->num_classes(),
                   std::max(train_loader_->local_batch(), test_loader_->local_batch())};
  model_ = build_model(*backend_, config_.model, input, config_.seed);
  freeze_layers(config_, *model_);
  check_consistency(
      comm_, {to_yaml(config_), model_->num_parameters(), train_set_->size(), test_set_->size()});
  schedule_ = std::make_unique<LrSchedule>(schedule_options(config_));
  optimizer_ = std::make_unique<Sgd>(*backend_, model_->parameters(), model_->gradients(),
                                     sgd_options(config_), model_->trainable_offset());
  const TrainConfig& tc = config_.train;
  const int64_t per_epoch = train_loader_->batches_per_epoch();
  if (comm_.rank() == 0)
    progress_ = std::make_unique<Progress>(tc.epochs, per_epoch, tc.max_iterations,
                                           tc.log_every_iterations);
  SchedulerContext ctx{
      *model_,
      *optimizer_,
      *schedule_,
      comm_,
      per_epoch,
      [this](const IterationReport& r) {
        if (progress_) progress_->iteration(r);
      },
      config_.compression.name,
      compute_slowdown(config_.cluster, comm_),
      {config_.algorithm.K, config_.algorithm.warmup_epochs, config_.algorithm.segments},
      config_.cluster.comm};
  scheduler_ = make_scheduler(config_.algorithm, std::move(ctx));
}

Trainer::~Trainer() = default;

std::string Trainer::describe() const {
  return fmt::format("{}\nbackend  {}\ncomm     {}\nalgo     {}\ntrain    {}\ntest     {}\n\n{}",
                     to_table(config_), backend_->name(), comm_.name(), scheduler_->describe(),
                     train_set_->describe(), test_set_->describe(), model_->summary());
}

Trainer::Eval Trainer::evaluate() {
  scheduler_->flush();
  model_->set_training(false);
  test_loader_->start_epoch(0);
  std::vector<double> sums{0, 0, 0};  // loss, correct, count
  Batch batch;
  while (test_loader_->next(batch)) {
    if (batch.labels.numel() == 0) continue;
    model_->forward(batch.images, batch.labels);
    const LossStats s = model_->last_stats();
    sums[0] += s.loss_sum, sums[1] += s.correct, sums[2] += static_cast<double>(s.count);
  }
  model_->set_training(true);
  comm_.allreduce_sum(sums);
  return sums[2] > 0 ? Eval{sums[0] / sums[2], sums[1] / sums[2]} : Eval{};
}

RunResult Trainer::run() {
  const bool root = comm_.rank() == 0;
  std::unique_ptr<MetricsWriter> metrics;
  if (root) {
    std::filesystem::create_directories(config_.output.dir);
    std::ofstream(config_.output.dir + "/config.yaml") << to_yaml(config_);
    metrics = std::make_unique<MetricsWriter>(config_.output.dir);
  }
  const TrainConfig& tc = config_.train;
  if (progress_) progress_->restart_clock();

  RunResult result;
  model_->set_training(true);
  for (int epoch = 0; epoch < tc.epochs; ++epoch) {
    const int64_t left = tc.max_iterations > 0 ? tc.max_iterations - result.iterations : 0;
    train_loader_->start_epoch(epoch);
    EpochStats mine = scheduler_->run_epoch(*train_loader_, epoch, left);
    result.iterations += mine.iterations;
    result.train_wall_s += mine.wall_s;

    std::vector<double> train_sums{mine.loss_sum, mine.correct, static_cast<double>(mine.samples)};
    comm_.allreduce_sum(train_sums);
    const auto rows = comm_.gather(to_row(mine), 0);
    if (root) {
      std::vector<EpochStats> per_rank;
      for (const auto& r : rows) per_rank.push_back(from_row(r));
      metrics->timing(epoch + 1, per_rank);
    }
    if (train_sums[2] > 0) {
      result.train_loss = train_sums[0] / train_sums[2];
      result.train_acc = train_sums[1] / train_sums[2];
    }
    const bool budget_done = tc.max_iterations > 0 && result.iterations >= tc.max_iterations;
    const bool last = epoch + 1 == tc.epochs || budget_done;
    if ((epoch + 1) % tc.eval_every_epochs == 0 || last) {
      const Eval e = evaluate();
      result.test_loss = e.loss, result.test_acc = e.acc;
      if (root) {
        progress_->clear_line();
        metrics->accuracy({epoch + 1, result.iterations, result.train_wall_s, result.train_loss,
                           result.train_acc, e.loss, e.acc});
        spdlog::info(
            "epoch {}/{}: train loss {:.4f} acc {:.4f} | test loss {:.4f} acc {:.4f} | {:.1f} s, "
            "{:.0f} samples/s",
            epoch + 1, tc.epochs, result.train_loss, result.train_acc, e.loss, e.acc, mine.wall_s,
            mine.wall_s > 0 ? train_sums[2] / mine.wall_s : 0.0);
      }
    } else if (root) {
      progress_->clear_line();
      spdlog::info("epoch {}/{}: train loss {:.4f} acc {:.4f} | {:.1f} s", epoch + 1, tc.epochs,
                   result.train_loss, result.train_acc, mine.wall_s);
    }
    if (budget_done) break;
  }
  scheduler_->flush();
  if (root)
    spdlog::info(
        "done: test accuracy {:.4f}; results in {}/ (accuracy.csv, timing.csv, config.yaml)",
        result.test_acc, config_.output.dir);
  return result;
}

}  // namespace dtrain
