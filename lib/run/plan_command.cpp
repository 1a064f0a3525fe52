#include "run/plan_command.h"

#include <fmt/format.h>

#include <algorithm>  // max, max_element, any_of, ranges::count
#include <fstream>
#include <memory>

#include "compress/codec.h"            // codec_names
#include "core/error.h"                // DTRAIN_INPUT_CHECK
#include "core/timer.h"                // Clock, seconds_since: where the profile's time went
#include "data/dataset_section.h"      // dataset_example: the profile plan's dataset
#include "plan/layer_profile.h"        // --write-profile, --profile
#include "plan/profiler.h"             // profile_compute, profile_transport, profile_codec
#include "run/memory_check.h"          // the memory column
#include "run/run_builder.h"           // build_run: the rank as training builds it
#include "run/run_options.h"           // nearest_batches, emulated_link
#include "sched/algorithm.h"           // the registry's timing rows, recommendations and planner
#include "sched/shard/shard_timing.h"  // sharded_timing_inputs: the shard modes' rows

namespace dtrain {
namespace {

constexpr int kWarmup = 3;
// Seconds of training steps in the profile: big models stop early, once a few were timed.
constexpr double kComputeBudget = 2.0;
// Seconds of the pipeline chain's batches: profile() scales the pieces to the whole model's
// measured time, so only their proportions matter, and one timed batch gives them.
constexpr double kChainBudget = 0.5;
// A whole minibatch's step (what a PipeDream replica runs) is timed on a 1-rank build of the
// model where scaling the share's step predicts it under this, within the second budget; longer
// ones are scaled from the share (their time grows in proportion to the rows).
constexpr double kWholeStepTimedBelow = 0.05;
constexpr double kWholeStepBudget = 0.3;

std::string ms(double s) {
  return fmt::format("{:.3f}", s * 1e3);
}

// The slowest rank's compute stretch among the first `ranks` (cluster.stragglers): every
// algorithm here waits for it each iteration.
double straggler_slowdown(const ClusterConfig& cluster, int ranks) {
  double slowdown = 1;
  for (const StragglerConfig& s : cluster.stragglers)
    if (s.rank < ranks) slowdown = std::max(slowdown, s.slowdown);
  return slowdown;
}

// A row's memory per rank as the table shows it: "-" where not modelled, a mark where it does
// not fit the limit.
std::string memory_cell(int64_t bytes, const MemoryLimit& limit) {
  if (bytes <= 0) return "-";
  return human_bytes(bytes) + (limit.bytes > 0 && bytes > limit.bytes ? " !" : "");
}

std::string table(const std::vector<Prediction>& rows, const std::vector<int64_t>& memory,
                  const MemoryLimit& limit) {
  std::string t = fmt::format("{:<9} {:<11} {:>10} {:>10} {:>13} {:>10} {:>8} {:>6} {:>12}  {}\n",
                              "algorithm", "compression", "compute_ms", "comm_ms", "iteration_ms",
                              "samples/s", "speedup", "SE", "memory/rank", "bound");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Prediction& r = rows[i];
    t += fmt::format("{:<9} {:<11} {:>10} {:>10} {:>13} {:>10.0f} {:>7.2f}x {:>6.2f} {:>12}  {}\n",
                     r.algorithm, r.compression, ms(r.compute_s), ms(r.comm_s), ms(r.iteration_s),
                     r.samples_per_s, r.speedup, r.scaling_efficiency,
                     memory_cell(i < memory.size() ? memory[i] : 0, limit),
                     std::string(r.compute_bound ? "compute" : "communication") +
                         (r.configuration.empty() ? "" : "  " + r.configuration) +
                         (r.detail.empty() ? "" : ", " + r.detail));
  }
  return t;
}

// The algorithms of the registry without a row in `rows` (no timing model yet): said, not left
// out.
std::string unmodelled(const std::vector<Prediction>& rows) {
  std::string t;
  for (const AlgorithmEntry& a : algorithms()) {
    const bool has_row = std::any_of(rows.begin(), rows.end(),
                                     [&a](const Prediction& r) { return r.algorithm == a.name; });
    if (!has_row)
      t += fmt::format("{:<9} no timing model yet: `dtrain plan` cannot predict its iteration\n",
                       a.name);
  }
  return t;
}

// What an equivalence class computes, in words, and where its accuracy was measured.
struct EquivalenceWords {
  const char* what;
  const char* accuracy;
};
EquivalenceWords words(Equivalence e) {
  switch (e) {
    case Equivalence::exact:
      return {"its updates equal sync's", "docs/comparing.md#compare-algorithms"};
    case Equivalence::stale:
      return {"applies stale gradients (computed on weights older than those they update)",
              "docs/comparing.md#compare-algorithms, docs/algorithms.md#pipedream"};
    case Equivalence::local:
      return {"ranks step their own models between averagings", "docs/algorithms.md#hpsgd"};
    case Equivalence::decentralized:
      return {"ranks average with neighbours, no global model",
              "docs/algorithms.md#ad-psgd-and-d-psgd"};
  }
  return {"", ""};
}

Equivalence equivalence_of(const std::string& algorithm) {
  const AlgorithmEntry* a = find_algorithm(algorithm);
  return a ? a->equivalence : Equivalence::exact;
}

// The predicted fastest row in wall-clock per sample (any row, model-parallel included), and
// what each algorithm computes: a faster iteration need not reach an accuracy sooner.
std::string overall_recommendation(const std::vector<Prediction>& rows) {
  std::string o;
  const auto fastest = std::max_element(
      rows.begin(), rows.end(),
      [](const Prediction& a, const Prediction& b) { return a.samples_per_s < b.samples_per_s; });
  if (fastest != rows.end())
    o += fmt::format(
        "\nrecommendation (fastest per sample): {} + {}{} at {:.0f} samples/s ({:.2f}x "
        "sync+none); {}: {}\n",
        fastest->algorithm, fastest->compression,
        fastest->configuration.empty() ? "" : " (" + fastest->configuration + ")",
        fastest->samples_per_s, fastest->speedup,
        equivalence_name(equivalence_of(fastest->algorithm)),
        words(equivalence_of(fastest->algorithm)).what);
  o += "a faster iteration is not a faster time to accuracy: the algorithms differ in what they "
       "compute, and only exact ones take sync's steps:\n";
  for (const AlgorithmEntry& a : algorithms()) {
    const EquivalenceWords w = words(a.equivalence);
    o += fmt::format("  {:<9} {:<13} {} (accuracy: {})\n", a.name, equivalence_name(a.equivalence),
                     w.what, w.accuracy);
  }
  return o;
}

// A whole minibatch's forward, backward and step on one core, and whether it was timed (else
// scaled from a rank's share).
struct WholeStep {
  double seconds = 0;
  bool timed = false;
};

// What the profile measured, turned into the timing model's inputs, and how to describe them.
struct Profile {
  TimingInputs in;
  // The model-parallel planner's layer profile for the whole minibatch (pipedream's): as
  // measured and scaled, and stretched as the compute times are (ranks sharing cores,
  // stragglers); and as the run's own planner measures it, its ranks profiling at once on the
  // shared cores (stretched for those, not for stragglers: they are slowed in training only).
  std::vector<LayerProfile> chain, chain_stretched, chain_as_run;
  bool tied_ends = false;  // the chain's ends share a tied weight (chain_ends_tie_lender)
  double tied_bytes = 0;   // its size
  WholeStep whole_step;    // the chain's total before the stretch
  TransportTimes transport;
  int iterations = 0, cores = 1;
  double crowding = 1, slowdown = 1;
  std::string backend, link;
  std::vector<std::string> notes;  // stand-in data
  // Where the profile's seconds went, in the order taken: (what, seconds).
  std::vector<std::pair<std::string, double>> seconds;
  // What the memory column is computed from: the model's input (its shape, classes, precision)
  // and the limit of a rank, the ranks sharing this machine (as the timing rows assume).
  ModelInput model_input;
  MemoryLimit limit;
};

// The options of `algorithm`: the config's when it is the chosen one, else its defaults.
AlgorithmConfig options_of(const ExperimentConfig& config, const AlgorithmEntry& algorithm) {
  return &config.algorithm.entry() == &algorithm ? config.algorithm
                                                 : AlgorithmConfig(algorithm.name);
}

// The whole model's forward, backward and step on a whole minibatch (a PipeDream replica's
// work per minibatch), from `share`, the profile of a rank's share of it. A step's time is not
// proportional to its rows (on 2 ranks the GPT's 12 rows took 5-25 % more than twice its 6, the
// MLP's 100 rows 12 % less than twice its 50), so where scaling the share's forward and
// backward by the ranks predicts a short step, it is timed on a 1-rank build of the model
// instead; the optimizer step is once per minibatch whatever its rows.
WholeStep whole_minibatch_step(const ExperimentConfig& config, int p, const ComputeTimes& share) {
  const double scaled = (share.forward_s + share.backward_s) * p + share.update_s;
  if (p <= 1 || scaled > kWholeStepTimedBelow) return {scaled, false};
  auto whole = build_plan_run(config, 1);
  const ComputeTimes t = profile_compute(*whole->model, *whole->optimizer, *whole->train_loader, 1,
                                         2, 20, kWholeStepBudget);
  return {t.forward_s + t.backward_s + t.update_s, true};
}

// One rank as training builds it (run_builder.h), for its share of the global batch, fed by
// its loader; then the transport and the codecs.
Profile profile(const ExperimentConfig& config, int p, int iterations) {
  const int batch = config.dataset.batch_size;
  Profile r;
  auto took = [&r, last = Clock::now()](const std::string& what) mutable {
    r.seconds.emplace_back(what, seconds_since(last));
    last = Clock::now();
  };
  auto run = build_plan_run(config, p);
  took("building");
  r.model_input = run->model_input;
  r.limit = memory_limit(config, *run->backend, p);
  Model& model = *run->model;
  // SAPipe's per-layer profile comes from the same steps (every other timed one).
  const ComputeTimes compute = profile_compute(model, *run->optimizer, *run->train_loader, p,
                                               kWarmup, iterations, kComputeBudget, true);
  took("training steps");
  const std::vector<LayerCost>& layers = compute.layers;
  const UpdatePasses passes =
      profile_update_passes(model, *run->optimizer, *run->train_loader, p, 3);
  took("update passes");
  // The model-parallel planner's: each piece of the partitionable chain for the whole minibatch
  // (a stage sees every row of it).
  std::vector<LayerProfile> chain;
  if (const AlgorithmEntry* planner = chain_planning_algorithm()) {
    // Timed on a rank's share of the minibatch, from the loader of the steps above: the pieces
    // are scaled to the whole model's time below, so only their proportions are kept, and
    // this halves the profile's time on 2 ranks (ResNet-20: 2.2 s at the whole minibatch). A
    // cut's activation grows with the rows: p times for the minibatch.
    const ModelParallelEntry& model_parallel = *planner->model_parallel;
    ModelSource share = model_source(*run);
    share.batch_size = batch / p;
    chain = model_parallel.profile_chain(*run->backend, share, *run->train_loader, kChainBudget);
    for (LayerProfile& l : chain) l.activation_bytes *= p;
    // The chain is timed piece by piece, each piece a model of its own whose input and output
    // change layout at the cut (a CNN's blocked tensors reordered); a stage runs its pieces as
    // one model, with cuts only at its ends. So the pieces are scaled to take together what
    // the whole model takes on a whole minibatch (ResNet-20: 0.65 of their sum; without it,
    // PipeDream's data parallelism was predicted 1.5 times its measured time).
    double pieces = 0;
    for (const LayerProfile& l : chain) pieces += l.compute_s();
    r.whole_step = whole_minibatch_step(config, p, compute);
    const double whole = r.whole_step.seconds;
    if (pieces > 0 && whole > 0)
      for (LayerProfile& l : chain) l.forward_s *= whole / pieces, l.backward_s *= whole / pieces;
    took(model_parallel.title + "'s chain");
  }

  r.notes = run->notes;
  r.iterations = compute.iterations;
  r.backend = run->backend->name();
  TimingInputs& in = r.in;
  // The ranks run on this machine (the emulated or local setup): more compute threads than
  // cores share them; and is a core left for each comm thread?
  r.cores = available_cores();
  const int threads = config.cluster.threads_per_rank;
  r.crowding = std::max(1.0, static_cast<double>(p) * threads / r.cores);
  in.comm_shares_core = p * (threads + 1) > r.cores;
  in.crowding = r.crowding;
  r.slowdown = straggler_slowdown(config.cluster, p);
  r.chain = r.chain_stretched = chain;
  const std::string lender = chain_ends_tie_lender(model_source(*run).spec, run->model_input);
  r.tied_ends = !lender.empty();
  for (const LayerRange& l : model.layer_ranges())
    if (l.name == lender) r.tied_bytes = 4.0 * static_cast<double>(l.count);
  for (LayerProfile& l : r.chain_stretched) {
    l.forward_s *= r.slowdown * r.crowding;
    l.backward_s *= r.slowdown * r.crowding;
  }
  r.chain_as_run = chain;
  for (LayerProfile& l : r.chain_as_run) {
    l.forward_s *= r.crowding;
    l.backward_s *= r.crowding;
  }
  in.l_data = compute.data_s;
  // An unslowed rank's; each rank's stretch (cluster.stragglers) is the rows' to apply: the
  // synchronising ones wait for the slowest, gossip only slows the straggler's own updates.
  in.l_for = compute.forward_s * r.crowding;
  in.l_back = compute.backward_s * r.crowding;
  for (int rank = 0; rank < p; ++rank) in.rank_slowdown.push_back(compute_slowdown(config, rank));
  in.l_up = compute.update_s * r.crowding;
  in.optimizer_states = static_cast<int>(run->optimizer->state_buffers().size());
  in.gradient_decay = run->optimizer->gradient_decay() != 0;
  in.l_step_dot = passes.step_dot_s * r.crowding;
  in.l_predict_sum = passes.predict_sum_s * r.crowding;
  in.l_step_predict = passes.step_predict_s * r.crowding;
  in.l_step_delta = passes.step_delta_s * r.crowding;
  in.l_predict = passes.predict_s * r.crowding;
  in.l_skew = compute.skew_s;
  in.idle_s = compute.idle_s;
  in.idle_penalty_s = compute.idle_penalty_s;
  in.n = model.num_parameters() - model.trainable_offset();
  // SAPipe's per-layer profile, stretched as the totals are (its row applies the stragglers).
  for (const LayerCost& l : layers) {
    in.layer_forward_s.push_back(l.forward_s * r.crowding);
    in.layer_backward_s.push_back(l.backward_s * r.crowding);
  }
  for (const LayerRange& l : model.layer_ranges())
    if (l.offset >= model.trainable_offset() && l.count > 0) in.layer_elements.push_back(l.count);
  in.p = p;
  in.global_batch = batch;
  in.epoch_iterations = run->train_loader->batches_per_epoch();

  const TransportTimes transport = profile_transport((in.n + p - 1) / p);
  r.transport = transport;
  for (const std::string& name : codec_names()) in.codecs.push_back(profile_codec(name, in.n, p));
  took("transport and codecs");
  in.gamma_s_per_byte = transport.gamma_s_per_byte;
  in.sync_s = transport.sync_s;
  in.yield_wait_s = transport.yield_wait_s;
  in.cores = r.cores;
  in.threads_per_rank = threads;
  in.crowding = r.crowding;
  in.link = link_cost(emulated_link(config), transport);
  if (const std::optional<LinkConfig>& link = config.cluster.link)
    r.link = fmt::format("emulated (cluster.link) {} + {}: every message is paced",
                         link->bandwidth.text, link->latency.text);
  else
    r.link =
        "the local shared-memory transport (no cluster.link): alpha and beta measured on this "
        "machine; set cluster.link to plan for a network";
  return r;
}

// The setting and every measured input, one per line, with what it is.
std::string describe(const ExperimentConfig& config, const Profile& r) {
  const TimingInputs& in = r.in;
  const int p = in.p;
  const int64_t local = in.global_batch / p;
  const int threads = config.cluster.threads_per_rank;
  const bool link = config.cluster.link.has_value();
  std::string o = fmt::format(
      "dtrain plan: {} on {} rank(s), global batch {} ({} per rank), {} thread(s) per rank\n"
      "backend  {}{}\nlink     {}\ncores    {} on this machine{}\n\n",
      config.name, p, in.global_batch, local, threads, r.backend,
      config.cluster.precision == DType::bf16
          ? "\nprecision bf16: the times below are the bf16 model's (cluster.precision)"
          : "",
      r.link, r.cores,
      in.comm_shares_core ? ": the comm threads share them with the compute threads" : "");
  for (const std::string& note : r.notes) o += "note     " + note + "\n";
  if (!r.notes.empty()) o += "\n";
  double total = 0;
  std::string parts;
  for (const auto& [what, s] : r.seconds) {
    total += s;
    parts += fmt::format("{}{} {:.1f}", parts.empty() ? "" : ", ", what, s);
  }
  o += fmt::format(
      "measured on one rank in {:.1f} s ({}), median of {} iterations after {} "
      "warm-up:\n",
      total, parts, r.iterations, kWarmup);
  auto line = [&o](const char* name, const std::string& value, const std::string& unit,
                   const std::string& what) {
    o += fmt::format("  {:<7} {:>10} {:<5} {}\n", name, value, unit, what);
  };
  line("l_for", ms(in.l_for), "ms", fmt::format("forward of {} samples", local));
  line("l_back", ms(in.l_back), "ms", "backward");
  // Measured with the run's optimizer (AdamW's step also reads and writes its two moments).
  line("l_up", ms(in.l_up), "ms", config.optimizer.entry().update_summary);
  line("l_wp3", ms(in.l_step_dot + in.l_predict_sum), "ms",
       fmt::format("SAPipe's wp3 passes over all n: its step summing g'Dx {} + its prediction "
                   "forming g^ {} (others: step+prediction {}, step+change {}, prediction {})",
                   ms(in.l_step_dot), ms(in.l_predict_sum), ms(in.l_step_predict),
                   ms(in.l_step_delta), ms(in.l_predict)));
  if (r.whole_step.seconds > 0)
    line("l_whole", ms(r.whole_step.seconds), "ms",
         fmt::format("forward, backward and step of a whole minibatch of {} (a PipeDream "
                     "replica's), alone on a core: {}",
                     config.dataset.batch_size,
                     r.whole_step.timed ? std::string("timed on a 1-rank build")
                     : p > 1            ? fmt::format("the share's steps x {}", p)
                                        : std::string("the steps above")));
  line("l_data", ms(in.l_data), "ms", "waiting for the data loader");
  line("skew", ms(in.l_skew), "ms", fmt::format("waiting for the slowest of {} ranks", p));
  std::string cold;
  for (size_t i = 0; i < in.idle_s.size(); ++i)
    cold += fmt::format("{}{:.3f} ms after {:g} ms", i ? ", " : "", in.idle_penalty_s[i] * 1e3,
                        in.idle_s[i] * 1e3);
  if (!cold.empty()) line("cold", "", "", "compute after waiting: + " + cold);
  if (r.crowding > 1)
    o += fmt::format(
        "          (l_for, l_back, l_up x {:.2f}: {} ranks x {} threads share {} cores)\n",
        r.crowding, p, threads, r.cores);
  if (r.slowdown > 1)
    o += fmt::format(
        "          (a straggler's l_for, l_back x {}: the rows that synchronise every rank run "
        "at its pace, gossip only its own updates)\n",
        r.slowdown);
  line("n", std::to_string(in.n), "",
       fmt::format("floats communicated per iteration ({:.2f} MB)", 4e-6 * in.n));
  line("p", std::to_string(p), "", "");
  line("alpha", fmt::format("{:.2f}", in.link.latency_s * 1e6), "us",
       link ? fmt::format("per message (+ {:.1f} us + {:.2f}% timer overshoot per paced sleep)",
                          in.link.overshoot_s * 1e6, in.link.overshoot_per_s * 100)
            : std::string("per message (core-to-core hand-off)"));
  const double beta = link ? in.link.sleep_s_per_byte() : in.link.copy_s_per_byte;
  line("beta", fmt::format("{:.4f}", beta * 1e9), "ns/B",
       link ? fmt::format("{:.3g} GB/s link, then {:.4f} ns/B real copy", 1e-9 / beta,
                          in.link.copy_s_per_byte * 1e9)
            : fmt::format("{:.3g} GB/s memory copy", 1e-9 / beta));
  line("gamma", fmt::format("{:.4f}", in.gamma_s_per_byte * 1e9), "ns/B", "float sum");
  line("S", fmt::format("{:.1f}", in.sync_s * 1e6), "us",
       "waking the comm thread with a request and the caller with its end");
  if (in.comm_shares_core)
    line("yield", ms(in.yield_wait_s), "ms",
         "a comm thread polling for its peer getting its core back from a compute thread");
  o += fmt::format(
      "  codecs in the ring's blocks of n/p = {} floats, ns per element (encode / decode / "
      "decode_add), wire bytes per element:\n",
      (in.n + p - 1) / p);
  for (const CodecCost& c : in.codecs)
    o += fmt::format("    {:<11} {:.3f} / {:.3f} / {:.3f}   {:g}\n", c.name, c.encode_s * 1e9,
                     c.decode_s * 1e9, c.decode_add_s * 1e9, c.bytes_per_element);
  return o;
}

}  // namespace

ExperimentConfig profile_plan_config(const std::string& profile,
                                     const std::vector<std::string>& overrides) {
  const AlgorithmEntry* planner = chain_planning_algorithm();
  DTRAIN_CHECK(planner != nullptr) << "no algorithm plans from a layer profile";
  return parse_config(fmt::format("name: plan_from_profile\nmodel: {{name: mlp}}\n"
                                  "dataset: {{name: {}}}\nalgorithm: {{name: {}}}\n",
                                  dataset_example(), planner->name),
                      "dtrain plan --profile " + profile + " (no --config)", overrides);
}

std::unique_ptr<Run> build_plan_run(const ExperimentConfig& config, int ranks) {
  // The plan profiles the whole model on one rank's share of the global batch, for every
  // data-parallel row: a model-parallel configuration (pipedream) is profiled as the
  // data-parallel rank it would otherwise be (its own row comes from the chain's profile).
  // It profiles a step on the whole local batch: the model is built for it, also where training
  // accumulates micro-batches (train.accumulation_steps).
  ExperimentConfig profiled = config;
  profiled.train.accumulation_steps = 1;
  if (config.algorithm.entry().model_parallel)
    profiled.algorithm = AlgorithmConfig();  // the default, data parallel
  return build_run(profiled, {0, ranks, 0, true}, DataFiles::stand_in_when_missing);
}

std::string plan_csv(const std::vector<Prediction>& predictions, int ranks,
                     const std::vector<int64_t>& memory, int64_t limit) {
  // New columns go at the end: readers that index the first seven keep working.
  std::string csv =
      "algorithm,compression,compute_s,comm_s,predicted_iteration_s,bound,configuration,"
      "samples_per_s,equivalence,memory_per_rank_bytes,fits_memory\n";
  for (size_t i = 0; i < predictions.size(); ++i) {
    const Prediction& r = predictions[i];
    const int64_t bytes = i < memory.size() ? memory[i] : 0;
    csv += fmt::format(
        "{},{},{:.9f},{:.9f},{:.9f},{},{},{:.3f},{},{},{}\n", r.algorithm, r.compression,
        r.compute_s, r.comm_s, r.iteration_s, r.compute_bound ? "compute" : "communication",
        r.configuration.empty() ? std::to_string(ranks) : r.configuration, r.samples_per_s,
        equivalence_name(equivalence_of(r.algorithm)), bytes > 0 ? std::to_string(bytes) : "",
        bytes <= 0 || limit <= 0 ? ""
        : bytes <= limit         ? "yes"
                                 : "no");
  }
  return csv;
}

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  if (!file) throw Error("cannot write " + path);
}

// `dtrain plan --profile P.csv`: the model-parallel planner's row from a profile taken
// elsewhere, for the config's cluster.link; no model is built.
void plan_from_profile(const ExperimentConfig& config, const PlanOptions& options,
                       std::ostream& out) {
  const AlgorithmEntry* planner = chain_planning_algorithm();
  DTRAIN_CHECK(planner != nullptr) << "no algorithm plans from a layer profile";
  DTRAIN_INPUT_CHECK(config.cluster.link.has_value())
      << "--profile " << options.profile
      << ": plans for a network, and cluster.link is not set (e.g. --set "
         "cluster.link.bandwidth=25Gbps)";
  const LinkConfig& link = *config.cluster.link;
  const std::vector<LayerProfile> chain = read_layer_profile(options.profile);
  const ModelParallelEntry& model_parallel = *planner->model_parallel;
  // This machine's timers and copies, for what the runtime would pay besides the link.
  const ChainPlan plan =
      model_parallel.plan_chain(options_of(config, *planner), {.chain = chain,
                                                               .ranks = options.ranks,
                                                               .batch = config.dataset.batch_size,
                                                               .link = emulated_link(config)});
  double total = 0;
  for (const LayerProfile& l : chain) total += l.compute_s();
  std::string o = fmt::format(
      "dtrain plan: {} from the layer profile {} ({} layers, {:.3f} ms per minibatch on one "
      "device), {} rank(s), link {} + {}\n",
      model_parallel.title, options.profile, chain.size(), total * 1e3, options.ranks,
      link.bandwidth.text, link.latency.text);
  out << o + plan.text;
  if (!options.csv.empty()) write_text(options.csv, plan_csv({plan.row}, options.ranks));
}

}  // namespace

void run_plan(const ExperimentConfig& config, const PlanOptions& options, std::ostream& out) {
  DTRAIN_INPUT_CHECK(options.ranks >= 1) << "--ranks: must be >= 1, got " << options.ranks;
  if (!options.profile.empty()) return plan_from_profile(config, options, out);
  const int p = options.ranks;
  const int batch = config.dataset.batch_size;
  DTRAIN_INPUT_CHECK(batch % p == 0)
      << config.source_path << ": dataset.batch_size: the global batch " << batch
      << " must be divisible by --ranks " << p << " (nearest: " << nearest_batches(batch, p) << ")";
  const Profile measured = profile(config, p, std::max(options.iterations, 1));
  const TimingInputs& in = measured.in;
  // Every algorithm with a timing row (the registry's), with each codec, and what they
  // recommend from these rows.
  // Each row's memory per rank (0: not modelled): the memory model's for a data-parallel row —
  // unsharded, or with the shard mode of its row; an algorithm's own extra buffers (Pipe-SGD's
  // K gradients, local copies) are not counted.
  std::vector<Prediction> rows;
  std::vector<int64_t> memory;
  auto memory_of = [&](ShardMode mode) {
    return largest_rank_memory(memory_inputs(config, measured.model_input, p, mode)).total();
  };
  const int64_t unsharded = memory_of(ShardMode::none);
  for (const AlgorithmEntry& a : algorithms()) {
    if (!a.predict) continue;
    const AlgorithmConfig options = options_of(config, a);
    for (const CodecCost& codec : in.codecs)
      if (a.compressions.empty() || std::ranges::count(a.compressions, codec.name) > 0) {
        rows.push_back(a.predict(in, codec, options));
        memory.push_back(unsharded);
      }
    // An algorithm with algorithm.shard: a row per sharded mode, without a codec (the timing
    // row on the mode's bytes: shard_timing.h).
    if (!a.shard || p == 1) continue;
    for (size_t m = 1; m <= static_cast<size_t>(a.deepest_shard); ++m) {
      const ShardMode mode = static_cast<ShardMode>(m);
      Prediction row = a.predict(sharded_timing_inputs(in, mode), in.codecs.front(), options);
      row.reference = false;  // the speedups stay against the unsharded row
      row.configuration = fmt::format("{} shard={}", p, shard_word(mode));
      rows.push_back(row);
      memory.push_back(memory_of(mode));
    }
  }
  std::string recommendations;
  for (const AlgorithmEntry& a : algorithms())
    if (a.recommend)
      recommendations.append("\n").append(a.recommend(in, rows, options_of(config, a)));
  // The model-parallel row: its plan of the stretched chain for these ranks, over the link the
  // other rows see.
  std::string planned;
  if (const AlgorithmEntry* planner = chain_planning_algorithm()) {
    const ChainPlan plan = planner->model_parallel->plan_chain(
        options_of(config, *planner), {.chain = measured.chain_stretched,
                                       .run_chain = &measured.chain_as_run,
                                       .ranks = p,
                                       .batch = batch,
                                       .link = emulated_link(config),
                                       .transport = &measured.transport,
                                       .tied_ends = measured.tied_ends,
                                       .tied_bytes = measured.tied_bytes,
                                       .replica_lag_s = in.l_skew,
                                       .crowded_wait_s = crowded_yield_wait_s(in),
                                       .crowding = in.crowding});
    rows.push_back(plan.row);
    memory.push_back(0);  // a pipeline's stages: not modelled yet
    planned = plan.text;
  }
  set_speedups(rows);

  std::string o = describe(config, measured);
  o += "\npredicted per iteration (each algorithm with the config's keys when it is the chosen "
       "one, else its defaults; speedup vs sync+none; SE = scaling efficiency, Eq. 7):\n";
  o += table(rows, memory, measured.limit) + unmodelled(rows);
  if (measured.limit.bytes > 0)
    o += fmt::format("memory/rank: the largest rank's (docs/memory.md); ! does not fit {} ({})\n",
                     human_bytes(measured.limit.bytes), measured.limit.source);
  o += overall_recommendation(rows) + recommendations;
  o += "compare with a training run: iteration_ms = 1000 * wall_s / iterations of timing.csv\n";
  const AlgorithmEntry& chosen = config.algorithm.entry();
  if (chosen.plan_note) o += chosen.plan_note(config.algorithm);
  o += planned;
  out << o;

  if (!options.csv.empty())
    write_text(options.csv, plan_csv(rows, p, memory, measured.limit.bytes));
  if (!options.write_profile.empty())
    write_text(options.write_profile, layer_profile_csv(measured.chain));
}

}  // namespace dtrain
