#include "sched/pipeline/pipedream_scheduler.h"

#include <fmt/format.h>

#include <algorithm>  // ranges::any_of, ranges::all_of
#include <cmath>      // isfinite
#include <numeric>    // accumulate, lcm

#include "comm/tags.h"  // kStopNotice: a signal passed on to the input stage
#include "core/error.h"
#include "core/stop_request.h"              // stop_signal, request_stop
#include "sched/pipeline/pipedream_plan.h"  // choose_pipeline, pipedream_chain_plan: the planner
#include "sched/pipeline/profile.h"         // profile_pipeline_chain
#include "sched/pipeline/tied_weights.h"    // check_tied_stages

namespace dtrain {

namespace {

using pipeline::Op;

std::string dashed(const std::vector<int>& replicas) {
  return fmt::format("{}", fmt::join(replicas, "-"));
}

// The lcm of the replicas of the stages that read data, and of the microbatches of a step: an
// epoch's units are a multiple of it.
int64_t units_multiple(const PipelineLayout& l) {
  const int64_t m = std::lcm(l.shape.replicas.front(), l.shape.replicas.back());
  return std::lcm(m, static_cast<int64_t>(l.spec.units_per_iteration()));
}

// A stage's part in a tie the stages separate: the copy it holds, or the stage holding one.
std::string tied_note(const StageSlice& stage, int s) {
  std::string note;
  for (const StageTie& t : stage.ties)
    note += t.borrower_stage == s
                ? fmt::format(
                      "; {} holds a copy of {}'s weight (tied), gradients summed with stage "
                      "{} every step",
                      t.borrower, t.lender, t.lender_stage)
                : fmt::format("; {}'s weight is tied to {} on stage {}", t.lender, t.borrower,
                              t.borrower_stage);
  return note;
}

// What each stage holds, one line per stage, and this configuration's schedule for a few
// minibatches as a rank × step grid.
std::string overview(const PipelineLayout& l, const std::vector<StageSlice>& stages) {
  std::string text =
      fmt::format("pipeline {} ({} stage(s) on {} rank(s)), schedule {}", dashed(l.shape.replicas),
                  l.shape.stages(), l.shape.ranks(), pipeline::schedule_kind_name(l.spec.kind));
  for (int s = 0; s < l.shape.stages(); ++s) {
    const StageSlice& st = stages[static_cast<size_t>(s)];
    text += fmt::format(
        "\n  stage {}: layers {}..{}, {} parameters, rank(s) {}..{}, up to {} in flight", s,
        st.first_layer, st.last_layer, st.parameters, l.shape.first_rank(s),
        l.shape.first_rank(s) + l.shape.replicas[static_cast<size_t>(s)] - 1,
        pipeline::in_flight_bound(l.shape, l.spec, s));
    text += tied_note(st, s);
  }
  pipeline::ScheduleSpec sample = l.spec;
  sample.minibatches = l.spec.flushes() ? 2 : 2 * l.shape.ranks() + 2;
  text += fmt::format("\nschedule of {} {} (F forward, B backward, R all-reduce, S step):\n",
                      sample.minibatches, l.spec.flushes() ? "steps" : "minibatches");
  text += pipeline::schedule_grid(l.shape, pipeline::build_schedule(l.shape, sample));
  return text;
}

std::vector<StageSlice> split(const PipelineLayout& l, const ModelSource& source) {
  ModelInput input = source.input;
  input.batch = l.unit_rows;
  std::vector<StageSlice> stages = split_model(source.spec, input, l.starts, "algorithm.stages");
  DTRAIN_CHECK(static_cast<int>(stages.size()) == l.shape.stages())
      << stages.size() << " stages for " << l.shape.stages() << " replica counts";
  check_tied_stages(stages, l.shape, l.spec);
  return stages;
}

// Pipedream's gradient accumulation is its flush schedules' microbatches: a step's minibatch in
// `microbatches` parts run one after another through the pipeline, their gradients summed into
// one step. 1f1b steps after every minibatch by design (its weight versions count them).
void check_accumulation(const ModelSource& source) {
  DTRAIN_INPUT_CHECK(source.accumulation_steps == 1)
      << "train.accumulation_steps: pipedream does not take it (got " << source.accumulation_steps
      << "); its gradient accumulation is algorithm.microbatches with schedule gpipe or "
         "1f1b_flush (a step's minibatch in that many microbatches, their gradients summed "
         "into one step); set train.accumulation_steps: 1";
}

void place_batches(const AlgorithmConfig& a, int rank, int world, LoaderOptions& train,
                   LoaderOptions& test) {
  // Not planned yet (a one-process --dry-run of `auto`): no stage to read for.
  if (pipeline_needs_planner(a.get<PipedreamOptions>(), world)) return;
  const PipelineLayout l = pipeline_layout(a.get<PipedreamOptions>(), world, train.global_batch);
  const int stage = l.shape.stage_of(rank);
  const int R = l.shape.replicas[static_cast<size_t>(stage)];
  // Replica q of a stage that reads data takes units q, q + R, q + 2R, ... of the shuffled
  // order: row slice q of global batches of R units. The permutation depends only on the seed,
  // the epoch and the dataset, so the input and the output stage agree on every unit's rows.
  train.global_batch = l.unit_rows * R;
  train.rank = l.shape.replica_of(rank);
  train.world = R;
  // Evaluation goes along replica 0 of every stage, a unit at a time (the stages' graphs are
  // built for a unit's rows).
  test.global_batch = l.unit_rows;
  test.rank = 0, test.world = 1;
  // Stages in the middle read nothing: their loaders prepare nothing ahead.
  if (stage != 0 && stage != l.shape.stages() - 1) train.prefetch = test.prefetch = 0;
}

// A decision as text, for the ranks to agree on: the replicas, then one stage name per line.
std::string encode(const PipedreamOptions& o) {
  std::string text = fmt::format("{}", fmt::join(o.replicas.value, ","));
  for (const std::string& name : o.stages.value) text += "\n" + name;
  return text;
}

void decode(const std::string& text, PipedreamOptions& o) {
  std::vector<std::string> lines;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(text.substr(at, nl - at));
  lines.push_back(text.substr(at));
  o.replicas = {"", {}};
  for (size_t p = 0, comma; p <= lines[0].size(); p = comma + 1) {
    comma = std::min(lines[0].find(',', p), lines[0].size());
    o.replicas.value.push_back(std::stoi(lines[0].substr(p, comma - p)));
  }
  o.stages = {"", std::vector<std::string>(lines.begin() + 1, lines.end())};
}

// PipeDream's planner on this job: profile the chain here, partition, agree on rank 0's choice.
std::string plan(AlgorithmConfig& a, const PlannerContext& ctx) {
  PipedreamOptions& o = a.get<PipedreamOptions>();
  if (!pipeline_needs_planner(o, ctx.world)) return "";
  // What the job's size already refutes, before anything is measured.
  if (!o.replicas.is("auto")) {
    const int ranks = std::accumulate(o.replicas.value.begin(), o.replicas.value.end(), 0);
    DTRAIN_INPUT_CHECK(ranks == ctx.world)
        << "algorithm.replicas: " << dashed(o.replicas.value) << " needs " << ranks
        << " rank(s), but the job has " << ctx.world << " (mpirun -np)";
  }
  if (!o.stages.is("auto")) {
    DTRAIN_INPUT_CHECK(static_cast<int>(o.stages.value.size()) < ctx.world)
        << "algorithm.stages: " << o.stages.value.size() + 1 << " stages need at least "
        << o.stages.value.size() + 1 << " ranks, but the job has " << ctx.world << " (mpirun -np)";
  }
  DTRAIN_INPUT_CHECK(ctx.source.frozen_layers == 0)
      << "optimizer.freeze_layers: pipedream trains every layer (set it to 0)";
  check_accumulation(ctx.source);
  DTRAIN_INPUT_CHECK(ctx.source.batch_size % o.microbatches == 0)
      << "dataset.batch_size: " << ctx.source.batch_size
      << " is not divisible by algorithm.microbatches " << o.microbatches;
  const std::unique_ptr<Loader> loader = ctx.minibatch_loader();
  const std::vector<LayerProfile> layers = profile_pipeline_chain(ctx.backend, ctx.source, *loader);
  // The link: cluster.link's, or this machine's transport (a memory copy), with what the
  // transport costs here besides.
  const PipelineChoice choice =
      choose_pipeline(layers, o, ctx.world, measured_pipeline_link(ctx.link, layers, ctx.world),
                      chain_ends_tied(ctx.source.spec, ctx.source.input));
  const PipedreamOptions mine = with_choice(o, choice);
  decode(ctx.agree(encode(mine)), o);  // rank 0's decision, on every rank
  return describe_choice(choice, mine);
}

}  // namespace

PipelineLayout pipeline_layout(const PipedreamOptions& o, int world, int64_t batch_size) {
  PipelineLayout l;
  // The planner (ModelParallelEntry::plan) has filled in what `auto` left open.
  DTRAIN_CHECK(!o.stages.is("auto")) << "algorithm.stages: auto was not planned";
  l.starts = o.stages.value;
  const int S = static_cast<int>(l.starts.size()) + 1;
  if (o.replicas.is("auto")) {
    DTRAIN_CHECK(world == S) << "algorithm.replicas: auto was not planned for " << world
                             << " ranks and " << S << " stages";
    l.shape.replicas.assign(static_cast<size_t>(S), 1);
  } else {
    l.shape.replicas = o.replicas.value;
    DTRAIN_INPUT_CHECK(static_cast<int>(l.shape.replicas.size()) == S)
        << "algorithm.replicas: " << l.shape.replicas.size() << " count(s) for the " << S
        << " stage(s) algorithm.stages makes";
    DTRAIN_INPUT_CHECK(l.shape.ranks() == world)
        << "algorithm.replicas: " << dashed(l.shape.replicas) << " needs " << l.shape.ranks()
        << " rank(s), but the job has " << world << " (mpirun -np)";
  }
  l.spec.kind = pipeline::schedule_kind_named(o.schedule);
  l.spec.microbatches = o.microbatches;
  l.spec.in_flight = o.in_flight.is("auto") ? 0 : o.in_flight.value;
  DTRAIN_INPUT_CHECK(l.spec.flushes() || o.microbatches == 1)
      << "algorithm.microbatches: " << o.microbatches
      << " — 1f1b steps after every minibatch; gpipe and 1f1b_flush split a step's minibatch "
         "into microbatches";
  DTRAIN_INPUT_CHECK(batch_size % o.microbatches == 0)
      << "dataset.batch_size: " << batch_size << " is not divisible by algorithm.microbatches "
      << o.microbatches;
  DTRAIN_INPUT_CHECK(!o.vertical_sync || o.weight_stashing)
      << "algorithm.vertical_sync: needs weight_stashing: true (the versions are stashed weights)";
  l.unit_rows = batch_size / o.microbatches;
  return l;
}

namespace {

// Its row's model-parallel part: where each stage's batches come from, the planner, the preview
// and `dtrain plan`'s chain.
ModelParallelEntry model_parallel_entry() {
  return {
      .place_batches = place_batches,
      .ranks_needed =
          [](const AlgorithmConfig& a) {
            const auto& o = a.get<PipedreamOptions>();
            if (!o.replicas.is("auto"))
              return std::accumulate(o.replicas.value.begin(), o.replicas.value.end(), 0);
            return o.stages.is("auto") ? 0 : static_cast<int>(o.stages.value.size()) + 1;
          },
      .preview =
          [](const AlgorithmConfig& a, const ModelSource& source, int world) {
            if (pipeline_needs_planner(a.get<PipedreamOptions>(), world))
              return std::string(
                  "pipeline: stages and replicas left to PipeDream's planner, which profiles "
                  "the model on every rank when the job starts and trains with rank 0's "
                  "choice; `dtrain plan --config FILE --ranks N` shows the choice for N ranks "
                  "without training");
            const PipelineLayout l =
                pipeline_layout(a.get<PipedreamOptions>(), world, source.batch_size);
            return overview(l, split(l, source));
          },
      .plan = plan,
      .title = "PipeDream",
      .profile_chain =
          [](Backend& backend, const ModelSource& source, Loader& minibatches, double budget_s) {
            return profile_pipeline_chain(backend, source, minibatches,
                                          {.budget_s = budget_s, .at_least = 1});
          },
      .plan_chain = pipedream_chain_plan};
}

}  // namespace

AlgorithmEntry pipedream_algorithm() {
  using namespace config;
  auto keys =
      Schema<PipedreamOptions>("pipedream")
          .key("schedule", &PipedreamOptions::schedule, choice({"1f1b", "gpipe", "1f1b_flush"}),
               "pipeline schedule")
          .key("stages", &PipedreamOptions::stages,
               word_or({"auto"}, list_of(nonempty_text(), 0, 0)),
               "the first layer of stage 2, 3, ... ([]: one stage; auto: PipeDream's partitioner)")
          .key("replicas", &PipedreamOptions::replicas,
               word_or({"auto"}, list_of(integer(Bounds::at_least(1)), 0, 1)),
               "ranks per stage, summing to the ranks (auto: PipeDream's partitioner; one rank per "
               "stage when the ranks are as many as the stages)")
          .key("in_flight", &PipedreamOptions::in_flight,
               word_or({"auto"}, integer(Bounds::at_least(1))),
               "minibatches in flight per replica (auto: NOAM = ⌈ranks of this and later "
               "stages / its replicas⌉; 1: plain model parallelism)")
          .key("microbatches", &PipedreamOptions::microbatches, integer(Bounds::at_least(1)),
               "microbatches per minibatch (gpipe, 1f1b_flush)")
          .key("weight_stashing", &PipedreamOptions::weight_stashing, boolean(),
               "backward uses the weights its forward used")
          .key("vertical_sync", &PipedreamOptions::vertical_sync, boolean(),
               "every stage uses the weights of the same version")
          .key("partition_cost", &PipedreamOptions::partition_cost, choice({"paper", "runtime"}),
               "the partitioner's cost: paper (§3.2: compute and weight sync as a max, the "
               "activations at each cut) or runtime (the public optimizer: their sum, no "
               "activations)");
  return {.name = "pipedream",
          .summary =
              "PipeDream (Harlap et al., 2018): pipeline-parallel stages, 1F1B, weight "
              "stashing, replicated stages",
          .keys = erase(std::move(keys)),
          .make = scheduler_factory<PipedreamScheduler, PipedreamOptions>(),
          // Only a replicated stage all-reduces (its gradients); with replicas left to the planner,
          // a job with more ranks than stages has one.
          .compresses =
              [](const AlgorithmConfig& a, int world) {
                const auto& o = a.get<PipedreamOptions>();
                if (!o.replicas.is("auto"))
                  return std::ranges::any_of(o.replicas.value, [](int r) { return r > 1; });
                return o.stages.is("auto") ? world > 1
                                           : world > static_cast<int>(o.stages.value.size()) + 1;
              },
          .model_parallel = model_parallel_entry(),
          // Weight stashing: a minibatch's backward uses the weights its forward used, which are
          // older than the latest ones (PipeDream's staleness).
          .equivalence = Equivalence::stale};
}

PipedreamScheduler::PipedreamScheduler(SchedulerContext ctx, const PipedreamOptions& options)
    : Scheduler(std::move(ctx)), options_(options) {
  const ModelSource& src = ctx_.source;
  DTRAIN_INPUT_CHECK(src.frozen_layers == 0)
      << "optimizer.freeze_layers: pipedream trains every layer (set it to 0)";
  DTRAIN_INPUT_CHECK(!src.spec["recompute"] || src.spec["recompute"].as<std::string>() == "none")
      << "model.recompute: blocks is not available with pipedream yet (its stages are built "
         "without recomputation); use model.recompute: none";
  check_accumulation(src);
  layout_ = pipeline_layout(options_, ctx_.comm.size(), src.batch_size);
  stages_ = split(layout_, src);
  const int rank = ctx_.comm.rank();
  stage_ = layout_.shape.stage_of(rank);
  replica_ = layout_.shape.replica_of(rank);
  const int S = layout_.shape.stages();
  ModelInput input = src.input;
  input.batch = layout_.unit_rows;
  model_ = std::make_unique<StageModel>(
      ctx_.model.backend(), stages_[static_cast<size_t>(stage_)], input, src.seed,
      pipeline::in_flight_bound(layout_.shape, layout_.spec, stage_), stage_ == 0, stage_ == S - 1);
  // model.init_from (checked against the whole model by the run builder): the stage's part.
  if (src.weights) model_->load_weights(*src.weights, "model.init_from");
  // The run's optimizer over the stage's parameters (AdamW's decay by the stage's tensors, as
  // the whole model's by its own).
  optimizer_ = make_optimizer(src.optimizer, ctx_.model.backend(), model_->parameters(),
                              model_->gradients(), model_->weight_slots());
  runner_ = std::make_unique<PipelineRunner>(ctx_.comm, layout_.shape, *model_, *optimizer_,
                                             layout_.unit_rows, options_.weight_stashing,
                                             ctx_.compression, options_.vertical_sync);
  if (ctx_.clip_grad_norm > 0) {
    // The norm over all stages is one minibatch's (a step's) only where every stage steps on
    // the same minibatches: 1f1b steps each stage once per round of its replicas.
    const auto& replicas = layout_.shape.replicas;
    DTRAIN_INPUT_CHECK(layout_.spec.flushes() ||
                       std::ranges::all_of(replicas, [&](int r) { return r == replicas[0]; }))
        << "optimizer.clip_grad_norm: pipedream clips by the norm over all stages, which needs "
           "every stage to step on the same minibatches; with schedule 1f1b the stages' "
           "replicas ("
        << dashed(replicas)
        << ") must be equal (or use schedule gpipe or 1f1b_flush, or clip_grad_norm: 0)";
    runner_->clip_gradients(ctx_.clip_grad_norm);
  }
  // A signal ends a 1f1b run early: the input stage's replicas decide alike (a vote among
  // them) and the end travels down the pipeline in the messages' headers.
  if (ctx_.stop) {  // (set on every rank or none: the splits are collectives)
    inputs_ = ctx_.comm.unpaced().split(stage_ == 0 ? 0 : 1, rank);
    const int multiple = static_cast<int>(units_multiple(layout_));
    Comm& world = ctx_.comm.unpaced();
    if (stage_ == 0) {
      input_vote_ = std::make_unique<StopVote>(*inputs_);
      // Rank 0 takes on a signal another stage's rank passed on; the vote spreads it.
      runner_->on_admission(
          [this, &world] {
            if (replica_ == 0)
              while (const std::optional<int> from = world.probe_any(tags::kStopNotice)) {
                int32_t signal = 0;
                world.recv(&signal, sizeof signal, *from, tags::kStopNotice);
                request_stop(signal);
              }
            return input_vote_->stop_here();
          },
          multiple);
    } else {
      runner_->on_admission(
          [this, &world] {
            if (!stop_notice_ && stop_signal() != 0) {  // once: rank 0 decides for the pipeline
              notice_signal_ = stop_signal();
              stop_notice_ =
                  world.isend(&notice_signal_, sizeof notice_signal_, 0, tags::kStopNotice);
            }
            return false;
          },
          multiple);
    }
  }
}

PipedreamScheduler::~PipedreamScheduler() = default;

std::string PipedreamScheduler::describe() const {
  return fmt::format("pipedream, this rank: stage {} replica {} ({} parameters)\n{}", stage_,
                     replica_, model_->num_parameters(), overview(layout_, stages_));
}

int PipedreamScheduler::units_per_epoch(int64_t max_iterations) const {
  const int64_t L = units_multiple(layout_);
  int64_t units = ctx_.source.train_samples / (layout_.unit_rows * L) * L;
  if (max_iterations > 0) {
    units = std::min(units, max_iterations * units_per_iteration());
  }
  DTRAIN_INPUT_CHECK(units > 0) << "dataset.batch_size: the training set's "
                                << ctx_.source.train_samples << " samples make no minibatch of "
                                << layout_.unit_rows * L << " rows for pipeline "
                                << dashed(layout_.shape.replicas);
  return static_cast<int>(units);
}

int64_t PipedreamScheduler::units_per_iteration() const {
  return layout_.spec.units_per_iteration();
}

int64_t PipedreamScheduler::epoch_iterations(int64_t) const {
  return units_per_epoch(0) / units_per_iteration();
}

void PipedreamScheduler::seek(Loader& loader, int epoch, int64_t first) {
  // The k-th unit is batch k / R of the loader of a stage that reads data.
  const int R = layout_.shape.replicas[static_cast<size_t>(stage_)];
  loader.start_epoch(epoch, first * units_per_iteration() / R);
}

int64_t PipedreamScheduler::progress_iterations(int64_t) const {
  // Rank 0 (stage 0, replica 0) reports each of its steps.
  const int iterations = layout_.spec.iterations_of(units_per_epoch(0));
  const int per_step = layout_.spec.iterations_per_step(layout_.shape.replicas.front());
  return (iterations + per_step - 1) / per_step;
}

EpochStats PipedreamScheduler::run_epoch(Loader& loader, const EpochPart& part) {
  const int epoch = part.epoch;
  EpochStats stats;
  const auto epoch_start = Clock::now();
  // A part of an epoch is a schedule of its own: the pipeline drains at its end (a checkpoint
  // within an epoch drains it), and it holds whole multiples of the units' lcm.
  const int64_t L = units_multiple(layout_), per = units_per_iteration();
  const int64_t epoch_units = units_per_epoch(0), first_units = part.first * per;
  int64_t part_units = epoch_units - first_units;
  if (part.count > 0)
    part_units = std::min(part_units, std::max<int64_t>(part.count * per / L, 1) * L);
  if (part_units <= 0) return stats;
  const int units = static_cast<int>(part_units);
  pipeline::ScheduleSpec spec = layout_.spec;
  spec.minibatches = spec.iterations_of(units);
  const std::vector<pipeline::Instruction> mine =
      pipeline::build_schedule(layout_.shape, spec)[static_cast<size_t>(ctx_.comm.rank())];
  int steps = 0;
  for (const auto& in : mine) steps += in.op == Op::step;

  // Units come in order: this replica's k-th is the k-th slice of its loader.
  const int R = layout_.shape.replicas[static_cast<size_t>(stage_)];
  Batch batch;
  auto batch_of = [&](int part_unit) {
    const int64_t unit = first_units + part_unit;
    DTRAIN_CHECK(loader.next(batch) && batch.index == unit / R)
        << "pipeline: rank " << ctx_.comm.rank() << " expected minibatch " << unit << " (batch "
        << unit / R << " of its loader), got batch " << batch.index;
    return batch;
  };
  // Step `step` of this part stands at (first_units + step · units / steps) / epoch_units of
  // the epoch (one rational, divided once: a whole epoch gives exactly step / steps), which is
  // iteration (first_units + step · units / steps) / per of it: the first of the step's
  // minibatches. The schedule's parts counted in iterations (warmup_iterations, a cosine over
  // train.max_iterations) take the run's iteration, as every other scheduler's do.
  const int64_t iterations_before = static_cast<int64_t>(epoch) * epoch_iterations(0);
  auto lr = [&](int step) {
    const int64_t position = first_units * steps + step * part_units;
    const double at = static_cast<double>(position) / static_cast<double>(steps * epoch_units);
    const int64_t iteration = iterations_before + position / (steps * per);
    return static_cast<float>(ctx_.schedule.lr_at(epoch + at, iteration));
  };
  // Rank 0's steps: each takes in a round of its replicas' minibatches (1f1b) or a minibatch.
  const int64_t samples_per_step =
      layout_.unit_rows * per * spec.iterations_per_step(layout_.shape.replicas.front());
  runner_->on_step([&](int step) {
    if (!ctx_.on_iteration || ctx_.comm.rank() != 0) return;
    ctx_.on_iteration({epoch, step, runner_->take_returned_loss(), samples_per_step});
  });
  runner_->set_step_base(minibatches_done_);
  const PipelineTotals totals =
      runner_->run(mine, spec, batch_of, lr, 1.0f / static_cast<float>(layout_.unit_rows));
  // A signal may have ended the run early: it ran totals.minibatches iterations (steps of gpipe
  // and 1f1b_flush) of `per` units each.
  minibatches_done_ += static_cast<uint64_t>(totals.minibatches * per);
  if (!std::isfinite(totals.loss_sum))
    throw Error(
        fmt::format("training diverged: the loss is {} in epoch {} on rank {} (lower "
                    "optimizer.lr?)",
                    totals.loss_sum, epoch + 1, ctx_.comm.rank()));
  stats.phases = totals.phases;
  runner_->take_comm_times(&stats.phases[Phase::comm], &stats.phases[Phase::compress]);
  stats.loss_sum = totals.loss_sum;
  stats.correct = totals.correct;
  stats.samples = totals.samples;
  // Minibatches through the pipeline (1f1b) or optimizer steps, the same on every rank.
  stats.iterations = totals.minibatches;
  stats.wall_s = seconds_since(epoch_start);
  return stats;
}

EvalResult PipedreamScheduler::evaluate(Loader& test) {
  const bool reads = stage_ == 0 || stage_ == layout_.shape.stages() - 1;
  const int batches = static_cast<int>(test.batches_per_epoch());
  if (reads && replica_ == 0) test.start_epoch(0);
  Batch batch;
  const PipelineTotals t = runner_->evaluate(batches, [&](int b) {
    DTRAIN_CHECK(test.next(batch) && batch.index == b)
        << "pipeline evaluation: rank " << ctx_.comm.rank() << " expected test batch " << b;
    return batch;
  });
  std::vector<double> sums{t.loss_sum, t.correct, static_cast<double>(t.samples)};
  ctx_.comm.allreduce_sum(sums);
  return sums[2] > 0 ? EvalResult{sums[0] / sums[2], sums[1] / sums[2]} : EvalResult{};
}

std::vector<std::pair<std::string, std::string>> PipedreamScheduler::own_results() {
  const std::vector<double> row{static_cast<double>(runner_->in_flight_max()),
                                static_cast<double>(runner_->versions_max()),
                                static_cast<double>(runner_->activation_bytes_sent()),
                                static_cast<double>(runner_->gradient_bytes_sent()),
                                static_cast<double>(runner_->allreduce_bytes_sent())};
  const auto rows = ctx_.comm.gather(row, 0);
  if (ctx_.comm.rank() != 0) return {};
  std::string csv =
      "rank,stage,replica,first_layer,last_layer,parameters,in_flight_max,versions_max,"
      "activation_bytes_sent,gradient_bytes_sent,allreduce_bytes_sent\n";
  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    const int s = layout_.shape.stage_of(r);
    const StageSlice& st = stages_[static_cast<size_t>(s)];
    const auto& v = rows[static_cast<size_t>(r)];
    csv += fmt::format("{},{},{},{},{},{},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f}\n", r, s,
                       layout_.shape.replica_of(r), st.first_layer, st.last_layer, st.parameters,
                       v[0], v[1], v[2], v[3], v[4]);
  }
  return {{"pipeline.csv", csv}};
}

void PipedreamScheduler::save(SchedulerState& state) {
  // The pipeline is drained at the end of every epoch: the stage's weights, statistics and
  // optimizer state are the whole state (no version is stashed between epochs).
  Backend& backend = model_->backend();
  state.put("pipedream.stage.parameters", model_->parameters(), backend);
  if (model_->buffers().numel() > 0)
    state.put("pipedream.stage.buffers", model_->buffers(), backend);
  // The optimizer's state: SGD's "pipedream.stage.momentum"; AdamW's "pipedream.stage.m",
  // "pipedream.stage.v" and the counter "pipedream.stage.step".
  for (const auto& [name, buffer] : optimizer_->state_buffers())
    state.put("pipedream.stage." + name, buffer, backend);
  for (const auto& [name, value] : optimizer_->counters())
    state.set_counter("pipedream.stage." + name, value);
  state.set_counter("pipedream.minibatches_done", static_cast<int64_t>(minibatches_done_));
}

NamedTensors PipedreamScheduler::weights() {
  // Each later stage's replica 0 sends its weights to rank 0 (stage 0's replica 0) as the bytes
  // of a safetensors file: names and shapes travel with the values. Stages are consecutive
  // layers, so appending them in stage order gives the whole model's order.
  Comm& comm = ctx_.comm.unpaced();  // not training traffic: no emulated link
  const int stages = layout_.shape.stages();
  if (stage_ > 0 && replica_ == 0) {
    const std::string bytes = encode_safetensors(model_->weights());
    const uint64_t size = bytes.size();
    comm.send(&size, sizeof size, 0, tags::kStageWeights);
    comm.send(bytes.data(), bytes.size(), 0, tags::kStageWeights);
  }
  if (comm.rank() != 0) return {};
  NamedTensors all = model_->weights();
  for (int s = 1; s < stages; ++s) {
    const int from = layout_.shape.first_rank(s);
    uint64_t size = 0;
    comm.recv(&size, sizeof size, from, tags::kStageWeights);
    std::string bytes(size, '\0');
    comm.recv(bytes.data(), bytes.size(), from, tags::kStageWeights);
    for (NamedTensor& t : decode_safetensors(bytes, "stage " + std::to_string(s) + "'s weights"))
      all.push_back(std::move(t));
  }
  return all;
}

void PipedreamScheduler::load(const SchedulerState& state) {
  Backend& backend = model_->backend();
  state.get("pipedream.stage.parameters", model_->parameters(), backend);
  if (model_->buffers().numel() > 0)
    state.get("pipedream.stage.buffers", model_->buffers(), backend);
  for (const auto& [name, buffer] : optimizer_->state_buffers())
    state.get("pipedream.stage." + name, buffer, backend);
  for (const auto& [name, value] : optimizer_->counters())
    optimizer_->load_counter(name, state.counter("pipedream.stage." + name));
  minibatches_done_ = static_cast<uint64_t>(state.counter("pipedream.minibatches_done"));
}

}  // namespace dtrain
