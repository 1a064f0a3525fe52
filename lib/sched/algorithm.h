// The algorithm registry: each distributed algorithm registers its name, a one-line summary,
// its own keys (a declarative schema over its options struct), its scheduler factory, its
// timing-model row and whatever else is its own (what `dtrain plan` says of it, its planner).
// The config reader and validation, `dtrain --help`, the key reference, the run builder and
// `dtrain plan` all take the algorithms from here and include no scheduler of their own; adding
// one is its files in lib/sched/ (its options struct, schema and `..._algorithm()` row, its
// scheduler, its timing row: docs/architecture.md §4) plus one line in registry.cpp.
#pragma once
#include <any>         // AlgorithmConfig::options: the chosen algorithm's own struct
#include <functional>  // the entry's factories
#include <memory>
#include <optional>  // PlannerContext::link, AlgorithmEntry::model_parallel
#include <string>
#include <vector>

#include "config/reader.h"           // Reader: where read_algorithm reports problems
#include "config/schema.h"           // AnySchema, Section, Style
#include "core/error.h"              // DTRAIN_CHECK
#include "plan/partitioner.h"        // LayerProfile: a model-parallel algorithm's plan
#include "plan/timing_model.h"       // TimingInputs, CodecCost, Prediction
#include "sched/scheduler.h"         // Scheduler, SchedulerContext
#include "sched/shard/shard_mode.h"  // ShardMode: algorithm.shard

namespace dtrain {

struct AlgorithmEntry;

// The chosen algorithm and exactly its keys: `options` holds the options struct its registry
// entry declares (SyncOptions, PipeSgdOptions, ...), nothing of any other algorithm.
struct AlgorithmConfig {
  AlgorithmConfig();                                  // sync with its defaults
  explicit AlgorithmConfig(const std::string& name);  // `name` with its defaults

  std::string name;
  std::any options;
  // Its registry row, found once when the config was made: what the run asks of the algorithm.
  const AlgorithmEntry& entry() const;

  template <class T>
  const T& get() const {
    const T* o = std::any_cast<T>(&options);
    DTRAIN_CHECK(o != nullptr) << "algorithm '" << name << "' has other options";
    return *o;
  }
  template <class T>
  T& get() {
    T* o = std::any_cast<T>(&options);
    DTRAIN_CHECK(o != nullptr) << "algorithm '" << name << "' has other options";
    return *o;
  }
  // Same name and same keys.
  bool operator==(const AlgorithmConfig& other) const;

 private:
  const AlgorithmEntry* entry_ = nullptr;  // never null: the table's rows live as long as it
};

// What a model-parallel algorithm's planner may use on this rank (run_builder.cpp fills it in):
// the backend and the model, minibatches of the training set, the job's size, the link, and how
// the ranks agree on one decision.
struct PlannerContext {
  Backend& backend;
  ModelSource source;
  // A loader of the training set in minibatches of source.batch_size rows, as rank 0 of one.
  std::function<std::unique_ptr<Loader>()> minibatch_loader;
  int world = 1;
  std::optional<LinkModel> link;  // cluster.link (emulated); none: this machine's transport
  // Every rank gets rank 0's `text` back (a broadcast), so that noisy timings never split a job.
  std::function<std::string(const std::string& text)> agree;
};

// What `dtrain plan` gives a model-parallel algorithm's planner (ModelParallelEntry::plan_chain).
struct ChainPlanInputs {
  // The layer profile of the model's partitionable chain, per minibatch of `batch` rows.
  const std::vector<LayerProfile>& chain;
  // The same chain as the run's own planner sees it (its ranks profile it at once, on the cores
  // they share; stragglers slow training only), from which the run picks its partition;
  // null: `chain`.
  const std::vector<LayerProfile>* run_chain = nullptr;
  int ranks = 1;
  int64_t batch = 1;
  std::optional<LinkModel> link;  // cluster.link (emulated); none: this machine's transport
  // This machine's transport as the plan measured it; null: the planner measures its own.
  const TransportTimes* transport = nullptr;
  // The chain's first and last elements share a tied weight (chain_ends_tie_lender), of
  // tied_bytes (0: not known), whose gradients the two ends sum before every step.
  bool tied_ends = false;
  double tied_bytes = 0;
  // What each replicated stage's all-reduce waits for besides its messages: the slowest
  // replica's random lag (the plan's l_skew),
  double replica_lag_s = 0;
  // and, where the ranks' compute threads outnumber the cores (crowding > 1), the last comm
  // thread's wait for its core (the timing model's crowding × yield_wait_s; 0: not crowded).
  // A replica's compute thread waits in that all-reduce, so the wait is at most the compute of
  // one thread alone on the core (the stage's stretched compute / crowding).
  double crowded_wait_s = 0, crowding = 1;
};
// Its answer: the plan's row and the text that explains the choice.
struct ChainPlan {
  Prediction row;
  std::string text;
};

// Makes an algorithm's scheduler from the job's context and its options.
using SchedulerFactory =
    std::function<std::unique_ptr<Scheduler>(SchedulerContext, const AlgorithmConfig&)>;

// The factory of a scheduler class S constructed from (SchedulerContext, const Options&).
template <class S, class Options>
SchedulerFactory scheduler_factory() {
  return [](SchedulerContext ctx, const AlgorithmConfig& a) -> std::unique_ptr<Scheduler> {
    return std::make_unique<S>(std::move(ctx), a.get<Options>());
  };
}

// How an algorithm's updates relate to sync's (`dtrain plan` says it per row, and plan.csv's
// `equivalence` column): the same updates (exact), updates from gradients of older weights
// (stale), ranks stepping their own models between averagings (local), or ranks averaging with
// neighbours and no global model (decentralized). A faster iteration of a class other than
// exact need not reach an accuracy sooner.
enum class Equivalence { exact, stale, local, decentralized };
// Its name in plan.csv ("exact", ...).
const char* equivalence_name(Equivalence e);

// What a model-parallel algorithm's row adds (pipedream's, AlgorithmEntry::model_parallel):
// each rank holds a part of the model, so it reads the whole minibatch stream, not its
// data-parallel slice, and a planner may lay the parts out.
struct ModelParallelEntry {
  // Sets where this rank's training and test batches come from; InputError for what the job of
  // `world` ranks cannot run. Every model-parallel row has it.
  std::function<void(const AlgorithmConfig&, int rank, int world, LoaderOptions& train,
                     LoaderOptions& test)>
      place_batches{};
  // The ranks the configuration needs (0: any), and the start-up text of what each rank holds
  // and does (pipedream: the stages and the schedule as a rank × step grid), also for
  // `--dry-run` on fewer ranks.
  std::function<int(const AlgorithmConfig&)> ranks_needed{};
  std::function<std::string(const AlgorithmConfig&, const ModelSource&, int world)> preview{};
  // Fills in what the options leave to a planner (pipedream's `auto` stages and replicas) for a
  // job of context.world ranks, before anything else is built; returns what to tell the user
  // (empty when nothing was left open). InputError for what cannot be planned.
  std::function<std::string(AlgorithmConfig&, const PlannerContext&)> plan{};
  // For `dtrain plan`: how the plan names it ("PipeDream"), the layer profile of the model's
  // partitionable chain (per minibatch of source.batch_size rows, measured on this rank's
  // backend and the loader's minibatches, timed for about budget_s seconds and at least one
  // minibatch), and its row planned on such a profile (its row of the timing model). The
  // algorithm with these is the one `dtrain plan --profile P.csv` plans.
  std::string title{};
  std::function<std::vector<LayerProfile>(Backend&, const ModelSource&, Loader& minibatches,
                                          double budget_s)>
      profile_chain{};
  std::function<ChainPlan(const AlgorithmConfig&, const ChainPlanInputs&)> plan_chain{};
};

// One row of the registry; each algorithm's file writes its row with designated initializers,
// naming only the fields it needs.
struct AlgorithmEntry {
  std::string name;                               // algorithm.name
  std::string summary;                            // one line: what it is, and its paper
  std::shared_ptr<const config::AnySchema> keys;  // its keys besides `name`
  SchedulerFactory make;                          // scheduler_factory<S, Options>()
  // The Pipe-SGD timing model's row for this algorithm (null: `dtrain plan` has none).
  std::function<Prediction(const TimingInputs&, const CodecCost&, const AlgorithmConfig&)>
      predict{};
  // `dtrain plan`: a paragraph recommending a configuration, from the timing rows of every
  // algorithm (before any model-parallel row); and a remark for when this is the chosen
  // algorithm (empty: none).
  std::function<std::string(const TimingInputs&, const std::vector<Prediction>& rows,
                            const AlgorithmConfig&)>
      recommend{};
  std::function<std::string(const AlgorithmConfig&)> plan_note{};
  // The codecs (compression.name) it runs with; empty: every one. `dtrain plan` predicts its
  // row with these only (gossip and d_psgd exchange whole models, uncompressed).
  std::vector<std::string> compressions{};
  // Whether a job of `world` ranks all-reduces what `compression` encodes; null: whenever it has
  // more than one rank. A setting without effect is a warning (pipedream without a replicated
  // stage compresses nothing).
  std::function<bool(const AlgorithmConfig&, int world)> compresses{};
  // Each rank samples the whole training set with a stream of its own (AD-PSGD's Strategy 1)
  // instead of its shard of the global batch: a faster rank may take more batches.
  bool own_data_stream = false;
  // What a model-parallel algorithm adds (pipedream); none: data parallel.
  std::optional<ModelParallelEntry> model_parallel{};
  // Whether its updates equal sync's (Equivalence); every row names its own.
  Equivalence equivalence = Equivalence::exact;
  // algorithm.shard of a configuration (shard/shard_mode.h); null: it has no such key (each
  // rank keeps the whole state).
  std::function<ShardMode(const AlgorithmConfig&)> shard{};
  // The deepest mode its `shard` key offers (the modes up to it, in ShardMode's order).
  ShardMode deepest_shard = ShardMode::parameters;
  // The bounds of the gradient segments it cuts the trainable range [begin, end) into (its
  // `segments` key resolved: gradient_segments.h), which a sharded state follows; null: segments
  // of about kAutoSegmentBytes.
  std::function<std::vector<int64_t>(const AlgorithmConfig&, int64_t begin, int64_t end)>
      segment_bounds{};
};

// The shard mode a configuration asks for: its row's `shard`, none without one.
inline ShardMode shard_mode(const AlgorithmConfig& a) {
  return a.entry().shard ? a.entry().shard(a) : ShardMode::none;
}

// The gradient segments of a configuration over [begin, end): its row's `segment_bounds`, else
// segments of about kAutoSegmentBytes (the memory model's cut of a sharded state).
std::vector<int64_t> gradient_segment_bounds(const AlgorithmConfig& a, int64_t begin, int64_t end);

inline const AlgorithmEntry& AlgorithmConfig::entry() const {
  return *entry_;
}

// Every registered algorithm, in the order of the documentation.
const std::vector<AlgorithmEntry>& algorithms();
// Null when no algorithm has that name.
const AlgorithmEntry* find_algorithm(const std::string& name);
// Their names ("sync, ps_sync, ...").
std::vector<std::string> algorithm_names();
// The algorithm that plans from a layer profile (its model_parallel->plan_chain: pipedream);
// null when none does.
const AlgorithmEntry* chain_planning_algorithm();

// Reads the `algorithm:` section: the name (a registered one; else the nearest is suggested)
// and that algorithm's keys; a key of another algorithm is reported naming both. Problems go to
// the section's Reader.
void read_algorithm(config::Section& section, AlgorithmConfig& out);
YAML::Node write_algorithm(const AlgorithmConfig& algorithm, config::Style style);
// The algorithm keys for the reference (each algorithm's own, marked with it).
std::vector<config::KeyDoc> algorithm_reference();
// For `dtrain --help`: each algorithm with its keys and defaults.
std::string algorithms_help();
// For the key reference (`dtrain keys`, docs/configuration.md): a Markdown table of every
// algorithm.
std::string algorithms_markdown();

// The scheduler of `algorithm` (registered, as validation ensured).
std::unique_ptr<Scheduler> make_scheduler(const AlgorithmConfig& algorithm, SchedulerContext ctx);

}  // namespace dtrain
