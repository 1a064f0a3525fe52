#include "run/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>  // min, max
#include <bit>        // bit_cast: doubles kept exactly in a checkpoint
#include <cmath>      // exp: perplexity
#include <filesystem>
#include <fstream>

#include "comm/gradient_transport.h"  // nccl_usable_everywhere: what cluster.comm: auto picks
#include "core/error.h"
#include "core/stop_request.h"  // signal_name
#include "run/consistency.h"    // check_ranks_agree
#include "run/host_memory.h"    // peak_resident_bytes: run.yaml
#include "run/metrics.h"        // MetricsWriter
#include "run/model_file.h"     // model.safetensors
#include "run/rank_checks.h"    // check_stragglers
#include "run/run_options.h"    // schedule_options: the lr note of a longer resumed run
#include "run/run_record.h"     // run.yaml
#include "run/vocab_file.h"     // vocab.json: the char tokenizer's vocabulary
#include "sched/algorithm.h"    // AlgorithmEntry: how max_iterations counts

namespace dtrain {

Trainer::Trainer(const ExperimentConfig& config, Comm& comm, TrainerOptions options)
    : comm_(comm), options_(options) {
  if (options.check_ranks) check_stragglers(config, comm.size());
  // Before anything is built: a run into another run's results stops here (every rank sees the
  // same folder). What --overwrite replaces goes only when the run is built and starts.
  if (options.data == DataFiles::required)
    claim_output_dir(config.output.dir, options.output, false);
  const TrainConfig& tc = config.train;
  // Before the run is built: its loader threads and the scheduler's comm threads join the trace.
  if (config.output.trace.enabled) trace_ = std::make_unique<RunTrace>(config.output.trace);
  // A planner's decision (pipedream's auto) is rank 0's on every rank.
  auto agree = [&comm](const std::string& text) {
    std::string bytes = text;
    comm.broadcast(bytes, 0);
    return bytes;
  };
  RunPlace place{comm.rank(),
                 comm.size(),
                 comm.local_rank(),
                 comm.rank() == 0,
                 agree,
                 /*plan=*/true,
                 /*fresh=*/options.output != OutputMode::resume};
  place.memory = options.memory_ranks > 0 ? MemoryPlace{options.memory_ranks, options.memory_ranks,
                                                        options.memory_ranks_known}
                                          : MemoryPlace{comm.size(), comm.local_size()};
  place.dry_run = options.dry_run;
  run_ = build_run(config, place, options.data);
  if (!built()) return;  // a dry run's model too large for this host: describe() only
  if (trace_)
    trace_->reserve(tc.epochs, run_->train_loader->batches_per_epoch(), tc.max_iterations);
  // A resumed run's token ids must mean what they meant: rank 0 (which wrote vocab.json) judges.
  if (options.output == OutputMode::resume && options.data == DataFiles::required) {
    std::string problem =
        comm.rank() == 0
            ? vocabulary_mismatch(config.output.dir, run_->train_set->vocabulary_json(),
                                  "dataset.path " + config.dataset.path)
            : std::string();
    comm.broadcast(problem, 0);
    if (!problem.empty()) throw InputError(problem);
  }
  check_ranks_agree(comm_, {to_yaml(config), run_->model->num_parameters(), run_->train_set->size(),
                            run_->test_set->size()});
  stop_ = std::make_unique<StopVote>(comm_);
  scheduler_ = build_scheduler(
      *run_, comm_,
      [this](const IterationReport& r) {
        if (trace_) trace_->iteration_done();
        if (progress_) progress_->iteration(r);
      },
      stop_.get());
  if (config.checkpoint || options.output == OutputMode::resume)
    checkpoints_ = std::make_unique<CheckpointStore>(
        comm_, CheckpointOptions{config.output.dir + "/checkpoints", to_yaml(config),
                                 config.checkpoint ? config.checkpoint->keep : 2});
  const int64_t per_epoch =
      scheduler_->progress_iterations(run_->train_loader->batches_per_epoch());
  if (comm_.rank() == 0)
    progress_ = std::make_unique<Progress>(options.progress, tc.epochs, per_epoch,
                                           tc.max_iterations, tc.log_every_iterations);
  const Shape labels = run_->train_set->label_shape();
  tokens_per_sample_ = labels.rank() == 1 ? labels[0] : 0;
  if (progress_) progress_->set_tokens_per_sample(tokens_per_sample_);
  run_yaml_ = std::make_shared<RunYamlFile>(config.output.dir);
  run_yaml_->memory(run_->memory ? run_->memory->rank.total() : 0, comm.rank(), comm.size());
}

Trainer::~Trainer() {
  // A failure writes run.yaml after the trainer is gone: its device peak, kept now.
  if (run_yaml_) run_yaml_->own_device_peak(run_->backend->peak_device_memory_bytes());
}

std::string Trainer::describe() const {
  std::string notes;  // (the config's warnings were printed when it was loaded)
  for (const auto& n : run_->notes) notes += "note     " + n + "\n";
  if (!run_->planned.empty()) notes += run_->planned;
  const int steps = run_->config.train.accumulation_steps;
  if (steps > 1)
    notes += fmt::format(
        "note     train.accumulation_steps {}: each rank's batch of {} runs as {} micro-batches "
        "of {} (the activations below are one micro-batch's); one update per {} rows\n",
        steps, run_->train_loader->local_batch(), steps, run_->model_input.batch,
        run_->config.dataset.batch_size);
  const std::string memory = run_->memory ? memory_table(*run_->memory) + "\n" : "";
  if (!built())
    return fmt::format(
        "{}\nbackend  {}\ncomm     {}\ntrain    {}\ntest     {}\n{}\n{}note     {}\n{}",
        to_table(run_->config), run_->backend->name(), comm_.name(), run_->train_set->describe(),
        run_->test_set->describe(), notes, memory, run_->not_built,
        describe_model(run_->config.model, run_->model_input));
  return fmt::format(
      "{}\nbackend  {}\ncomm     {}\nalgo     {}\ntrain    {}\ntest     {}\n{}\n{}{}",
      to_table(run_->config), run_->backend->name(), comm_.name(), scheduler_->describe(),
      run_->train_set->describe(), run_->test_set->describe(), notes, memory,
      run_->model->summary());
}

std::vector<std::pair<std::string, std::string>> Trainer::resolved_settings() const {
  const ClusterConfig& cluster = run_->config.cluster;
  std::vector<std::pair<std::string, std::string>> resolved;
  if (cluster.device == "auto")
    resolved.emplace_back("cluster.device",
                          run_->backend->device() == Device::cpu ? "cpu" : "cuda");
  if (cluster.comm == "auto" && comm_.size() > 1)
    resolved.emplace_back("cluster.comm", gradients_on_nccl_ ? "nccl" : "mpi");
  for (auto& setting : scheduler_->resolved_settings()) resolved.push_back(std::move(setting));
  return resolved;
}

std::vector<std::string> Trainer::notes_and_plan() const {
  std::vector<std::string> notes = run_->notes;
  notes.insert(notes.end(), run_->no_effect.begin(), run_->no_effect.end());
  if (!run_->planned.empty()) notes.push_back(run_->planned);
  return notes;
}

namespace {

// Doubles kept exactly in a checkpoint's counters.
int64_t bits(double v) {
  return std::bit_cast<int64_t>(v);
}
double from_bits(int64_t v) {
  return std::bit_cast<double>(v);
}

// The iterations of the next part of an epoch when `done` are done: up to the next checkpoint
// (checkpoint.every_iterations), evaluation (train.eval_every_iterations) or the end of
// train.max_iterations; 0: to the epoch's end.
int64_t part_length(const TrainConfig& tc, const std::optional<CheckpointConfig>& cc,
                    int64_t done) {
  int64_t count = 0;
  if (cc && cc->every_iterations > 0) count = cc->every_iterations - done % cc->every_iterations;
  if (tc.eval_every_iterations > 0) {
    const int64_t to_eval = tc.eval_every_iterations - done % tc.eval_every_iterations;
    count = count > 0 ? std::min(count, to_eval) : to_eval;
  }
  if (tc.max_iterations > 0) {
    const int64_t left = tc.max_iterations - done;
    count = count > 0 ? std::min(count, left) : left;
  }
  return count;
}

void add(EpochStats& into, const EpochStats& part) {
  into.iterations += part.iterations;
  into.wall_s += part.wall_s;
  for (size_t p = 0; p < kPhaseCount; ++p) into.phases.seconds[p] += part.phases.seconds[p];
  into.loss_sum += part.loss_sum;
  into.correct += part.correct;
  into.samples += part.samples;
}

}  // namespace

void Trainer::checkpoint(const Position& at, const RunResult& result) {
  TraceScope span(Region::checkpoint);
  const auto start = Clock::now();
  SchedulerState state;
  scheduler_->save(state);
  state.set_counter("trainer.epoch", at.point.epoch);
  state.set_counter("trainer.iteration", at.point.iteration);
  state.set_counter("trainer.updates", at.updates);
  state.set_counter("trainer.iterations", result.iterations);
  state.set_counter("trainer.epochs", run_->config.train.epochs);  // a resume's lr note
  const std::vector<double> so_far = to_row(at.epoch_so_far);
  for (size_t i = 0; i < so_far.size(); ++i)
    state.set_counter("trainer.epoch_so_far." + std::to_string(i), bits(so_far[i]));
  const double sums[] = {result.train_wall_s, result.test_loss, result.test_acc, result.train_loss,
                         result.train_acc};
  for (size_t i = 0; i < std::size(sums); ++i)
    state.set_counter("trainer.result." + std::to_string(i), bits(sums[i]));
  if (metrics_) {
    state.set_text("trainer.accuracy.csv", metrics_->accuracy_csv());
    state.set_text("trainer.timing.csv", metrics_->timing_csv());
  }
  checkpoints_->write(at.point, state);
  const auto seconds = comm_.gather({seconds_since(start)}, 0);
  if (comm_.rank() == 0) {
    double slowest = 0;
    for (const auto& s : seconds) slowest = std::max(slowest, s[0]);
    if (progress_) progress_->clear_line();
    spdlog::info("checkpoint {}: checkpoint_s {:.3f} (the slowest rank's)", at.point.describe(),
                 slowest);
  }
}

Trainer::Position Trainer::resume(RunResult& result, std::string& accuracy_csv,
                                  std::string& timing_csv) {
  SchedulerState state;
  const std::optional<CheckpointPoint> found = checkpoints_->read_newest(state);
  DTRAIN_INPUT_CHECK(found) << "--resume " << run_->config.output.dir
                            << ": no intact checkpoint in " << run_->config.output.dir
                            << "/checkpoints; start again with --overwrite";
  scheduler_->load(state);
  Position at;
  at.point = *found;
  at.updates = state.counter("trainer.updates");
  result.iterations = state.counter("trainer.iterations");
  std::vector<double> so_far(kPhaseCount + 5);
  for (size_t i = 0; i < so_far.size(); ++i)
    so_far[i] = from_bits(state.counter("trainer.epoch_so_far." + std::to_string(i)));
  at.epoch_so_far = from_row(so_far);
  double* sums[] = {&result.train_wall_s, &result.test_loss, &result.test_acc, &result.train_loss,
                    &result.train_acc};
  for (size_t i = 0; i < std::size(sums); ++i)
    *sums[i] = from_bits(state.counter("trainer.result." + std::to_string(i)));
  if (state.has("trainer.accuracy.csv")) {
    accuracy_csv = state.text("trainer.accuracy.csv");
    timing_csv = state.text("trainer.timing.csv");
  }
  if (comm_.rank() == 0) {
    spdlog::info("resuming {}", at.point.describe());
    if (state.has("trainer.epochs"))
      note_schedule(static_cast<int>(state.counter("trainer.epochs")), at.point);
  }
  return at;
}

void Trainer::note_schedule(int saved_epochs, const CheckpointPoint& at) const {
  const ExperimentConfig& config = run_->config;
  if (saved_epochs == config.train.epochs) return;
  const int64_t epoch_length =
      scheduler_->epoch_iterations(run_->train_loader->batches_per_epoch());
  const double where =
      at.epoch + (epoch_length > 0 ? static_cast<double>(at.iteration) / epoch_length : 0.0);
  ExperimentConfig saved = config;
  saved.train.epochs = saved_epochs;
  const double before = LrSchedule(schedule_options(saved)).lr_at(where);
  const double now = LrSchedule(schedule_options(config)).lr_at(where);
  const std::string& name = config.optimizer.schedule.name;
  // Only cosine anneals over train.epochs (lib/optim/lr_schedule.h); the others are fixed in
  // epochs from the start, whatever the run's length.
  const std::string schedule =
      name == "cosine"
          ? fmt::format("the cosine schedule now spans {} epochs", config.train.epochs)
          : fmt::format("the {} schedule does not depend on train.epochs: unchanged", name);
  const std::string rate =
      before == now ? fmt::format("the learning rate stays {:.6g}", now)
                    : fmt::format("the learning rate jumps from {:.6g} to {:.6g}", before, now);
  spdlog::info("train.epochs {} -> {}: {}: {} ({})", saved_epochs, config.train.epochs, schedule,
               rate, at.describe());
}

Stopped Trainer::stopped(const CheckpointPoint& at, bool saved) const {
  const std::string& dir = run_->config.output.dir;
  return {stop_->signal(),
          saved ? fmt::format("stopped {}; the checkpoint and the CSVs are written: continue with "
                              "--resume {}",
                              at.describe(), dir)
                : fmt::format("stopped {}; the CSVs are written (no checkpoint: the config has "
                              "no `checkpoint:`)",
                              at.describe())};
}

RunResult Trainer::run() {
  const std::vector<std::string> hosts = gather_hosts(comm_);
  const std::vector<int> local_ranks = gather_local_ranks(comm_);
  // The vote every gradient all-reducer takes (a collective, the same answer on every rank).
  if (run_->config.cluster.comm == "auto" && comm_.size() > 1)
    gradients_on_nccl_ = nccl_usable_everywhere(
        comm_, run_->backend->device() == Device::cpu ? nullptr : run_->backend.get(), "auto");
  RunResult result;
  Position at;
  std::string accuracy_so_far, timing_so_far;
  if (options_.output == OutputMode::resume) at = resume(result, accuracy_so_far, timing_so_far);
  const int64_t epoch_length =
      scheduler_->epoch_iterations(run_->train_loader->batches_per_epoch());
  // The last iteration done: the checkpoint's (an epoch's end counts as its last iteration).
  if (at.point.iteration > 0)
    run_yaml_->progress(at.point.epoch + 1, at.point.iteration, result.iterations);
  else if (at.point.epoch > 0)
    run_yaml_->progress(at.point.epoch, epoch_length, result.iterations);
  run_yaml_->resolved(resolved_settings());
  if (comm_.rank() == 0) write_run_files(hosts, local_ranks, accuracy_so_far, timing_so_far);
  // From here run.yaml is this run's on every rank (rank 0 has written it): whichever rank
  // fails may end its status. Before, a failing resume leaves the earlier run's status alone.
  std::string record = run_yaml_->record();
  comm_.broadcast(record, 0);
  run_yaml_->arm(record);
  const TrainConfig& tc = run_->config.train;
  const std::optional<CheckpointConfig>& cc = run_->config.checkpoint;
  if (trace_) trace_->align_clocks(comm_);
  if (progress_) {
    // The ETA counts what is left: what came before the checkpoint is done.
    const double part =
        epoch_length > 0 ? static_cast<double>(at.point.iteration) / epoch_length : 0;
    progress_->resume_at(at.point.epoch + part);
    progress_->restart_clock();
  }
  // A stop: run.yaml says so (rank 0, as for completion) before main exits 128 + signal.
  auto stop = [this](const CheckpointPoint& point, bool saved) {
    Stopped s = stopped(point, saved);
    record_peak_memory();
    run_yaml_->resolved(resolved_settings());
    if (comm_.rank() == 0) run_yaml_->end("stopped", signal_name(s.signal));
    return s;
  };

  run_->model->set_training(true);
  while (at.point.epoch < tc.epochs) {
    const int epoch = at.point.epoch;
    const EpochEnd end = train_epoch(at, result, epoch_length);
    const bool whole = at.point.iteration >= epoch_length;
    if (end.stopping && !whole && !end.budget_done) {
      // Stopped within the epoch: its rows come when a resumed run finishes it.
      if (cc) checkpoint(at, result);
      throw stop(at.point, cc.has_value());
    }
    const bool last = epoch + 1 == tc.epochs || end.budget_done;
    finish_epoch(at, result, last, end.eval_due);
    // (A budget that ended the epoch early leaves no checkpoint: its rows are written.)
    const bool due = cc && cc->every_epochs > 0 && ((epoch + 1) % cc->every_epochs == 0 || last);
    const bool save = cc && whole && (due || end.stopping);  // a stop saves where it is
    if (save) checkpoint(at, result);
    if (end.budget_done) break;  // the run is over: a stop asked meanwhile has nothing left to stop
    if (end.stopping) throw stop(at.point, save);
  }
  finish(result);
  record_peak_memory();
  run_yaml_->resolved(resolved_settings());
  if (comm_.rank() == 0) run_yaml_->end("completed", "");
  return result;
}

void Trainer::record_peak_memory() {
  // One row per rank, summed: every rank gets every rank's figures (exact in doubles).
  const size_t world = static_cast<size_t>(comm_.size()), me = static_cast<size_t>(comm_.rank());
  std::vector<double> row(2 * world, 0.0);
  row[me] = static_cast<double>(peak_resident_bytes());
  row[world + me] = static_cast<double>(run_->backend->peak_device_memory_bytes());
  comm_.allreduce_sum(row);
  std::vector<int64_t> rss(world), device(world);
  for (size_t r = 0; r < world; ++r)
    rss[r] = static_cast<int64_t>(row[r]), device[r] = static_cast<int64_t>(row[world + r]);
  run_yaml_->peak_memory(std::move(rss), std::move(device));
}

void Trainer::write_run_files(const std::vector<std::string>& hosts,
                              const std::vector<int>& local_ranks,
                              const std::string& accuracy_so_far,
                              const std::string& timing_so_far) {
  const ExperimentConfig& config = run_->config;
  // Every rank has checked the folder and built its part of the run: the old results go now.
  if (options_.output == OutputMode::overwrite)
    claim_output_dir(config.output.dir, options_.output, true);
  std::filesystem::create_directories(config.output.dir);
  std::ofstream(config.output.dir + "/config.yaml") << to_yaml(config);
  write_vocabulary_file(config.output.dir, run_->train_set->vocabulary_json());
  run_yaml_->start(run_record_yaml({comm_.size(), hosts, run_->backend->name(), comm_.name(),
                                    scheduler_->describe(), run_->train_set->describe(),
                                    run_->test_set->describe(), notes_and_plan(), local_ranks}));
  metrics_ = std::make_unique<MetricsWriter>(config.output.dir, accuracy_so_far, timing_so_far);
}

Trainer::EpochEnd Trainer::train_epoch(Position& at, RunResult& result, int64_t epoch_length) {
  const TrainConfig& tc = run_->config.train;
  const std::optional<CheckpointConfig>& cc = run_->config.checkpoint;
  const int epoch = at.point.epoch;
  Loader& loader = *run_->train_loader;
  EpochEnd end;
  if (trace_) trace_->epoch_starts(epoch);
  TraceScope span(Region::epoch, epoch + 1);
  scheduler_->seek(loader, epoch, at.point.iteration);
  for (;;) {
    const int64_t count = part_length(tc, cc, result.iterations);
    const EpochStats part = scheduler_->run_epoch(
        loader, EpochPart{epoch, at.point.iteration, scheduler_->own_share(count)});
    add(at.epoch_so_far, part);
    const int64_t advanced = scheduler_->iterations_advanced(part.iterations);
    const int64_t before = result.iterations;
    at.point.iteration += advanced;
    result.iterations += advanced;
    if (advanced > 0) {
      run_yaml_->progress(epoch + 1, at.point.iteration, result.iterations);
      run_yaml_->resolved(resolved_settings());  // for a failure's status (SAPipe's k, once chosen)
    }
    end.budget_done = tc.max_iterations > 0 && result.iterations >= tc.max_iterations;
    if (end.budget_done && comm_.rank() == 0) {
      const AlgorithmEntry& a = run_->config.algorithm.entry();
      if (progress_) progress_->clear_line();
      spdlog::info("train.max_iterations: {} iterations{} reached in epoch {}: training ends",
                   result.iterations, a.own_data_stream ? " (the ranks' updates together)" : "",
                   epoch + 1);
    }
    // A signal on any rank: the ranks stopped at the same iteration (or the part's end).
    end.stopping = stop_->settle();
    if (end.stopping && comm_.rank() == 0) {
      if (progress_) progress_->clear_line();
      spdlog::warn("{}: stopping at {} (Ctrl-C again to end at once)", signal_name(stop_->signal()),
                   at.point.describe());
    }
    const bool eval_due =
        tc.eval_every_iterations > 0 &&
        before / tc.eval_every_iterations != result.iterations / tc.eval_every_iterations;
    if (end.stopping || count == 0 || advanced == 0 || at.point.iteration >= epoch_length ||
        end.budget_done) {
      // The epoch's end (or the run's) evaluates anyway when the run goes on to it.
      end.eval_due = eval_due && !end.stopping;
      return end;
    }
    if (eval_due) evaluate_within(at, result);
    if (cc && cc->every_iterations > 0 &&
        before / cc->every_iterations != result.iterations / cc->every_iterations)
      checkpoint(at, result);  // at.updates: the epoch's end adds all of its iterations
  }
}

void Trainer::finish_epoch(Position& at, RunResult& result, bool last, bool eval_due) {
  const int epoch = at.point.epoch;
  const EpochStats& mine = at.epoch_so_far;
  result.train_wall_s += mine.wall_s;
  // (The iterations are summed too, unused: the reduction stays the one earlier runs made.)
  std::vector<double> train_sums{mine.loss_sum, mine.correct, static_cast<double>(mine.samples),
                                 static_cast<double>(mine.iterations)};
  comm_.allreduce_sum(train_sums);
  // accuracy.csv's iteration: the iterations of the epochs so far, each as the scheduler counts
  // them (the ranks' updates together where each rank updates on its own: gossip).
  const int64_t updates = at.updates + at.point.iteration;
  const auto rows = comm_.gather(to_row(mine), 0);
  if (comm_.rank() == 0) {
    std::vector<EpochStats> per_rank;
    for (const auto& r : rows) per_rank.push_back(from_row(r));
    metrics_->timing(epoch + 1, per_rank);
  }
  if (train_sums[2] > 0) {
    result.train_loss = train_sums[0] / train_sums[2];
    result.train_acc = train_sums[1] / train_sums[2];
  }
  const TrainConfig& tc = run_->config.train;
  if ((epoch + 1) % tc.eval_every_epochs == 0 || last || eval_due) {
    evaluate(epoch, updates, mine, train_sums[2], result);
  } else if (comm_.rank() == 0) {
    progress_->clear_line();
    spdlog::info("epoch {}/{}: {} acc {:.4f} | {:.1f} s", epoch + 1, tc.epochs,
                 format_loss("train loss", result.train_loss, tokens_per_sample_), result.train_acc,
                 mine.wall_s);
  }
  if (comm_.rank() == 0) {
    const std::string summary = scheduler_->epoch_summary();
    if (!summary.empty()) spdlog::info("{}", summary);
  }
  at = Position{{epoch + 1, 0}, EpochStats{}, updates};
}

void Trainer::evaluate_within(const Position& at, RunResult& result) {
  const EpochStats& mine = at.epoch_so_far;
  std::vector<double> train_sums{mine.loss_sum, mine.correct, static_cast<double>(mine.samples)};
  comm_.allreduce_sum(train_sums);
  RunResult so_far = result;  // the epoch's training loss so far, its time counted
  so_far.train_wall_s += mine.wall_s;
  if (train_sums[2] > 0) {
    so_far.train_loss = train_sums[0] / train_sums[2];
    so_far.train_acc = train_sums[1] / train_sums[2];
  }
  evaluate(at.point.epoch, at.updates + at.point.iteration, mine, train_sums[2], so_far,
           at.point.iteration);
  result.test_loss = so_far.test_loss, result.test_acc = so_far.test_acc;
}

void Trainer::evaluate(int epoch, int64_t updates, const EpochStats& mine, double samples,
                       RunResult& result, int64_t within) {
  EvalResult e;
  {
    TraceScope span(Region::evaluate);
    e = scheduler_->evaluate(*run_->test_loader);
  }
  result.test_loss = e.loss, result.test_acc = e.acc;
  if (comm_.rank() != 0) return;
  progress_->clear_line();
  metrics_->accuracy({epoch + 1, updates, result.train_wall_s, result.train_loss, result.train_acc,
                      e.loss, e.acc});
  const std::string where = within > 0 ? fmt::format(", iteration {}", within) : std::string();
  spdlog::info("epoch {}/{}{}: {} acc {:.4f} | {} acc {:.4f} | {:.1f} s, {}", epoch + 1,
               run_->config.train.epochs, where,
               format_loss("train loss", result.train_loss, tokens_per_sample_), result.train_acc,
               format_loss("test loss", e.loss, tokens_per_sample_), e.acc, mine.wall_s,
               format_rate(mine.wall_s > 0 ? samples / mine.wall_s : 0.0, tokens_per_sample_));
}

void Trainer::finish(const RunResult& result) {
  const ExperimentConfig& config = run_->config;
  scheduler_->flush();
  for (const auto& [name, content] : scheduler_->own_results())
    if (comm_.rank() == 0) std::ofstream(config.output.dir + "/" + name) << content;
  write_model_file(*scheduler_, config, comm_.rank());
  if (trace_) trace_->write(comm_, config.output.dir + "/trace.json");
  if (comm_.rank() == 0)
    spdlog::info(
        "done: test {}accuracy {:.4f}{}; results in {}/ (accuracy.csv, timing.csv, "
        "config.yaml, run.yaml, model.safetensors{})",
        tokens_per_sample_ > 0 ? "next-token " : "", result.test_acc,
        tokens_per_sample_ > 0 ? fmt::format(", loss {:.4f}, perplexity {:.2f}", result.test_loss,
                                             std::exp(result.test_loss))
                               : std::string(),
        config.output.dir, trace_ ? ", trace.json" : "");
}

}  // namespace dtrain
