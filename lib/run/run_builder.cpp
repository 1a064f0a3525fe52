#include "run/run_builder.h"

#include <fmt/format.h>

#include <algorithm>  // max

#include "comm/paced_comm.h"   // make_paced_comm: cluster.link
#include "core/error.h"        // DTRAIN_INPUT_CHECK
#include "nn/model_weights.h"  // load_model_weights: model.init_from
#include "run/host_memory.h"   // available_host_memory: a dry run's own build
#include "run/rank_checks.h"   // no_effect_settings, check_accumulation
#include "run/run_options.h"   // config → module options
#include "sched/algorithm.h"   // make_scheduler

namespace dtrain {

namespace {

std::unique_ptr<Dataset> open_split(const ExperimentConfig& c, Split split, DataFiles data,
                                    std::vector<std::string>& notes) {
  if (data == DataFiles::stand_in_when_missing && dataset_files_missing(c.dataset)) {
    auto stand_in = open_stand_in(c.dataset, split, c.seed);
    notes.push_back(stand_in->describe() + " (training needs the files: datasets/README.md)");
    return stand_in;
  }
  return open_dataset(c.dataset, split, c.seed);
}

// What the model and its optimizer are built from, for `input`.
ModelSource source_of(const Run& run, const ModelInput& input) {
  const ExperimentConfig& c = run.config;
  return {c.model,
          input,
          c.seed,
          c.optimizer,
          c.dataset.batch_size,
          static_cast<int64_t>(run.train_set->size()),
          static_cast<int64_t>(run.test_set->size()),
          c.optimizer.freeze_layers,
          run.initial_weights,
          c.train.accumulation_steps};
}

// Lets the algorithm's planner fill in its `auto` keys in run.config from measurements of this
// rank's backend on minibatches of the training set; every rank takes rank 0's decision.
void plan_model_parallel(const ModelParallelEntry& model_parallel, Run& run) {
  const ExperimentConfig& c = run.config;
  const Dataset& train = *run.train_set;
  PlannerContext ctx{
      *run.backend,
      source_of(run, {train.sample_shape(), train.num_classes(), c.dataset.batch_size}),
      [&run] { return minibatch_loader(run); },
      run.place.world,
      emulated_link(c),
      run.place.agree ? run.place.agree : [](const std::string& text) { return text; }};
  try {
    run.planned = model_parallel.plan(run.config.algorithm, ctx);
  } catch (const InputError& e) {
    throw InputError(c.source_path + ": " + e.what());
  }
}

}  // namespace

std::unique_ptr<Run> build_run(const ExperimentConfig& config, const RunPlace& place,
                               DataFiles data) {
  const AlgorithmEntry& algorithm = config.algorithm.entry();
  const std::optional<ModelParallelEntry>& model_parallel = algorithm.model_parallel;
  DTRAIN_INPUT_CHECK(model_parallel || config.dataset.batch_size % place.world == 0)
      << config.source_path << ": dataset.batch_size: the global batch "
      << config.dataset.batch_size << " must be divisible by the " << place.world
      << " data-parallel ranks (nearest: "
      << nearest_batches(config.dataset.batch_size, place.world) << ")";
  if (!model_parallel) check_accumulation(config, place.world);
  auto run = std::make_unique<Run>();
  run->config = config;
  run->place = place;
  run->backend = make_backend(backend_options(config, place.local_rank, place.announce));
  if (config.cluster.tf32 && run->backend->device() == Device::cpu &&
      config.cluster.device != "cpu")
    run->no_effect.push_back("no effect: cluster.tf32: the run is on the CPU");

  run->train_set = open_split(config, Split::train, data, run->notes);
  run->test_set = open_split(config, Split::test, data, run->notes);
  if (model_parallel && model_parallel->plan && place.plan)
    plan_model_parallel(*model_parallel, *run);
  for (auto& line : no_effect_settings(run->config, place.world))  // as planned
    run->no_effect.push_back(std::move(line));
  // Batches in the backend's host memory (pinned for a GPU), uploaded to a GPU by the loaders'
  // threads while the compute stream works.
  for (LoaderOptions* o : {&run->train_loading, &run->test_loading}) {
    *o = o == &run->train_loading ? train_loader_options(config, place.rank, place.world)
                                  : test_loader_options(config, place.rank, place.world);
    o->allocator = &run->backend->host_allocator();
    o->device = run->backend.get();
  }
  if (model_parallel) {
    try {
      model_parallel->place_batches(run->config.algorithm, place.rank, place.world,
                                    run->train_loading, run->test_loading);
    } catch (const InputError& e) {
      throw InputError(config.source_path + ": " + e.what());
    }
  }
  if (algorithm.own_data_stream) {
    // The local batch from the whole set, in an order of this rank's own.
    LoaderOptions& o = run->train_loading;
    o.global_batch /= place.world;
    o.seed += 7919 * static_cast<uint64_t>(place.rank);
    o.rank = 0, o.world = 1;
  }
  run->train_loader = std::make_unique<Loader>(*run->train_set, run->train_loading);
  run->test_loader = std::make_unique<Loader>(*run->test_set, run->test_loading);

  // Gradient accumulation runs micro-batches: the model is built for one of them (its
  // activations are what accumulation saves), and evaluation splits test batches to fit.
  const int64_t steps = config.train.accumulation_steps;
  run->model_input = {
      run->train_set->sample_shape(), run->train_set->num_classes(),
      steps > 1 ? run->train_loader->local_batch() / steps
                : std::max(run->train_loader->local_batch(), run->test_loader->local_batch()),
      model_precision(config, *run->backend)};
  if (run->model_input.precision == DType::bf16) {
    const std::string caveat = run->backend->bf16_caveat();
    if (!caveat.empty()) run->notes.push_back(caveat);
  }
  // Before the model is allocated: a run that cannot fit stops here (exit 2, with the table).
  if (place.memory && memory_modelled(config)) {
    run->memory = memory_report(config, run->model_input, *run->backend, *place.memory);
    if (place.memory->ranks_known)
      check_memory(*run->memory, config.source_path);
    else if (!run->memory->fits())
      run->notes.push_back(fmt::format(
          "memory: on one rank this run would need {} a rank, more than {}; the job's ranks "
          "decide (--dry-run --ranks N checks them)",
          human_bytes(run->memory->rank.total()), human_bytes(run->memory->limit.bytes)));
    // A dry run builds the model as this one process would train it alone (the whole batch),
    // which may hold more than a rank of the job: not beyond what this host has.
    const std::optional<int64_t> available = available_host_memory();
    if (place.dry_run && available) {
      const int64_t own =
          largest_rank_memory(memory_inputs(config, run->model_input, place.world, ShardMode::none))
              .total();
      if (own > *available) {
        run->not_built = fmt::format(
            "not built: this process alone would hold {} ({} bytes), more than this host's "
            "available {}; the table above is the job's",
            human_bytes(own), own, human_bytes(*available));
        return run;
      }
    }
  }
  // Model parallel: the scheduler builds this rank's part; the whole model describes the run and
  // holds no batch.
  run->model = build_model(*run->backend, config.model,
                           model_parallel
                               ? ModelInput{run->model_input.sample_shape, run->model_input.classes,
                                            1, run->model_input.precision}
                               : run->model_input,
                           config.seed);
  if (!config.init_from.empty() && place.fresh) {
    NamedTensors weights = load_initial_weights(config, *run->model);
    if (model_parallel)
      run->initial_weights = std::make_shared<const NamedTensors>(std::move(weights));
  }
  freeze_layers(config, *run->model);
  run->schedule = std::make_unique<LrSchedule>(schedule_options(config));
  run->optimizer = make_optimizer(config, *run->model);
  return run;
}

ModelSource model_source(const Run& run) {
  return source_of(run, run.model_input);
}

std::unique_ptr<Loader> minibatch_loader(const Run& run) {
  LoaderOptions o = train_loader_options(run.config, 0, 1);
  o.allocator = &run.backend->host_allocator();
  o.device = run.backend.get();
  return std::make_unique<Loader>(*run.train_set, o);
}

std::string preview_model_parallel(const ExperimentConfig& config) {
  const std::optional<ModelParallelEntry>& model_parallel = config.algorithm.entry().model_parallel;
  if (!model_parallel || !model_parallel->preview) return "";
  const int ranks = std::max(1, model_parallel->ranks_needed(config.algorithm));
  auto run =
      build_run(config, {0, ranks, 0, false, {}, /*plan=*/false}, DataFiles::stand_in_when_missing);
  try {
    std::string notes;
    for (const auto& n : run->notes) notes += "note     " + n + "\n";
    if (!run->planned.empty()) notes += run->planned + "\n";
    return notes + model_parallel->preview(run->config.algorithm, model_source(*run), ranks) +
           "\n\n" + run->model->summary();
  } catch (const InputError& e) {
    throw InputError(config.source_path + ": " + e.what());
  }
}

NamedTensors load_initial_weights(const ExperimentConfig& config, Model& model) {
  const std::string key = config.source_path + ": model.init_from";
  NamedTensors weights;
  try {
    weights = read_safetensors(config.init_from);
  } catch (const InputError& e) {
    throw InputError(key + ": " + e.what());
  }
  load_model_weights(model, weights, key + ": " + config.init_from);
  return weights;
}

std::unique_ptr<Comm> configure_comm(const ExperimentConfig& config, std::unique_ptr<Comm> comm) {
  const std::optional<LinkModel> link = emulated_link(config);
  return link ? make_paced_comm(std::move(comm), *link) : std::move(comm);
}

std::unique_ptr<Scheduler> build_scheduler(Run& run, Comm& comm,
                                           std::function<void(const IterationReport&)> progress,
                                           StopVote* stop) {
  DTRAIN_CHECK(comm.rank() == run.place.rank && comm.size() == run.place.world)
      << "the run was built for rank " << run.place.rank << " of " << run.place.world;
  const ExperimentConfig& c = run.config;
  SchedulerContext ctx{*run.model,
                       *run.optimizer,
                       *run.schedule,
                       comm,
                       run.train_loader->batches_per_epoch(),
                       std::move(progress),
                       c.compression.name,
                       compute_slowdown(c, comm.rank()),
                       c.cluster.comm,
                       model_source(run),
                       stop,
                       c.optimizer.clip_grad_norm,
                       c.train.accumulation_steps};
  try {
    return make_scheduler(c.algorithm, std::move(ctx));
  } catch (const InputError& e) {
    throw InputError(c.source_path + ": " + e.what());
  }
}

}  // namespace dtrain
