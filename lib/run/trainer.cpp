#include "run/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "run/consistency.h"  // check_consistency
#include "run/metrics.h"      // MetricsWriter
#include "run/run_record.h"   // run.yaml
#include "sched/algorithm.h"  // find_algorithm: how the ranks count updates

namespace dtrain {

Trainer::Trainer(const ExperimentConfig& config, Comm& comm, TrainerOptions options) : comm_(comm) {
  check_stragglers(config, comm.size());
  const TrainConfig& tc = config.train;
  // Before the run is built: its loader threads and the scheduler's comm threads join the trace.
  if (config.output.trace.enabled) trace_ = std::make_unique<RunTrace>(config.output.trace);
  // A planner's decision (pipedream's auto) is rank 0's on every rank.
  auto agree = [&comm](const std::string& text) {
    std::string bytes = text;
    comm.broadcast(bytes, 0);
    return bytes;
  };
  run_ = build_run(config, {comm.rank(), comm.size(), comm.local_rank(), comm.rank() == 0, agree},
                   options.data);
  if (trace_)
    trace_->reserve(tc.epochs, run_->train_loader->batches_per_epoch(), tc.max_iterations);
  check_consistency(comm_, {to_yaml(config), run_->model->num_parameters(), run_->train_set->size(),
                            run_->test_set->size()});
  const AlgorithmEntry* algorithm = find_algorithm(config.algorithm.name);
  own_updates_ = algorithm && algorithm->own_data_stream;
  // Rank 0's share of an epoch: where ranks draw their own batches, the epoch's N/M updates are
  // shared by all ranks.
  scheduler_ = build_scheduler(*run_, comm_, [this](const IterationReport& r) {
    if (trace_) trace_->iteration_done();
    if (progress_) progress_->iteration(r);
  });
  const int64_t per_epoch = scheduler_->progress_iterations(
      run_->train_loader->batches_per_epoch() / (own_updates_ ? comm.size() : 1));
  if (comm_.rank() == 0)
    progress_ = std::make_unique<Progress>(options.progress, tc.epochs, per_epoch,
                                           tc.max_iterations, tc.log_every_iterations);
}

Trainer::~Trainer() = default;

std::string Trainer::describe() const {
  std::string notes;  // (the config's warnings were printed when it was loaded)
  for (const auto& n : run_->notes) notes += "note     " + n + "\n";
  if (!run_->planned.empty()) notes += run_->planned;
  return fmt::format("{}\nbackend  {}\ncomm     {}\nalgo     {}\ntrain    {}\ntest     {}\n{}\n{}",
                     to_table(run_->config), run_->backend->name(), comm_.name(),
                     scheduler_->describe(), run_->train_set->describe(),
                     run_->test_set->describe(), notes, run_->model->summary());
}

std::vector<std::string> Trainer::notes_and_plan() const {
  std::vector<std::string> notes = run_->notes;
  if (!run_->planned.empty()) notes.push_back(run_->planned);
  return notes;
}

RunResult Trainer::run() {
  const ExperimentConfig& config = run_->config;
  const bool root = comm_.rank() == 0;
  const std::vector<std::string> hosts = gather_hosts(comm_);
  std::unique_ptr<MetricsWriter> metrics;
  if (root) {
    std::filesystem::create_directories(config.output.dir);
    std::ofstream(config.output.dir + "/config.yaml") << to_yaml(config);
    std::ofstream(config.output.dir + "/run.yaml") << run_record_yaml(
        {comm_.size(), hosts, run_->backend->name(), comm_.name(), scheduler_->describe(),
         run_->train_set->describe(), run_->test_set->describe(), notes_and_plan()});
    metrics = std::make_unique<MetricsWriter>(config.output.dir);
  }
  const TrainConfig& tc = config.train;
  if (trace_) trace_->align_clocks(comm_);
  if (progress_) progress_->restart_clock();

  RunResult result;
  int64_t updates = 0;
  run_->model->set_training(true);
  for (int epoch = 0; epoch < tc.epochs; ++epoch) {
    const int64_t left = tc.max_iterations > 0 ? tc.max_iterations - result.iterations : 0;
    if (trace_) trace_->epoch_starts(epoch);
    EpochStats mine;
    {
      TraceScope span(Region::epoch, epoch + 1);
      run_->train_loader->start_epoch(epoch);
      mine = scheduler_->run_epoch(*run_->train_loader, epoch, left);
    }
    result.iterations += mine.iterations;
    result.train_wall_s += mine.wall_s;

    // The budget is decided together: ranks of an asynchronous algorithm (gossip) do different
    // numbers of iterations, and one rank stopping alone would leave the others waiting for it.
    const bool my_budget_done = tc.max_iterations > 0 && result.iterations >= tc.max_iterations;
    std::vector<double> train_sums{mine.loss_sum, mine.correct, static_cast<double>(mine.samples),
                                   my_budget_done ? 1.0 : 0.0,
                                   static_cast<double>(mine.iterations)};
    comm_.allreduce_sum(train_sums);
    // accuracy.csv's iteration: the updates so far, over all ranks where each rank updates on
    // its own (gossip), else the iterations every rank did.
    updates += own_updates_ ? static_cast<int64_t>(train_sums[4]) : mine.iterations;
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
    const bool budget_done = train_sums[3] > 0;
    const bool last = epoch + 1 == tc.epochs || budget_done;
    if ((epoch + 1) % tc.eval_every_epochs == 0 || last) {
      EvalResult e;
      {
        TraceScope span(Region::evaluate);
        e = scheduler_->evaluate(*run_->test_loader);
      }
      result.test_loss = e.loss, result.test_acc = e.acc;
      if (root) {
        progress_->clear_line();
        metrics->accuracy({epoch + 1, updates, result.train_wall_s, result.train_loss,
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
    if (root) {
      const std::string summary = scheduler_->epoch_summary();
      if (!summary.empty()) spdlog::info("{}", summary);
    }
    if (budget_done) break;
  }
  scheduler_->flush();
  for (const auto& [name, content] : scheduler_->own_results())
    if (root) std::ofstream(config.output.dir + "/" + name) << content;
  if (trace_) trace_->write(comm_, config.output.dir + "/trace.json");
  if (root)
    spdlog::info(
        "done: test accuracy {:.4f}; results in {}/ (accuracy.csv, timing.csv, "
        "config.yaml, run.yaml{})",
        result.test_acc, config.output.dir, trace_ ? ", trace.json" : "");
  return result;
}

}  // namespace dtrain
