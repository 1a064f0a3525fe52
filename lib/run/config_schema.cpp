// Every key of an experiment file, declared once: its kind (type and constraint), its doc line
// and when it applies. Defaults are the initialisers in config_types.h. Reading, config.yaml,
// the settings table and the key reference all come from these declarations.
#include "run/config_schema.h"

#include <filesystem>  // the file's stem: the default name

#include "data/dataset_section.h"  // read_dataset, write_dataset, dataset_reference
#include "nn/spec.h"               // check_model_section, model_reference: the `model:` keys

namespace dtrain {

using namespace config;

namespace {

const Schema<LinkConfig>& link_schema() {
  static const auto s =
      Schema<LinkConfig>("link")
          .key("bandwidth", &LinkConfig::bandwidth, rate(), "every message is paced to this rate")
          .required("a rate such as 10Gbps when cluster.link is given")
          .key("latency", &LinkConfig::latency, duration(), "and delayed by this much first");
  return s;
}

const Schema<StragglerConfig>& straggler_schema() {
  static const auto s =
      Schema<StragglerConfig>("straggler")
          .key("rank", &StragglerConfig::rank, integer(Bounds::at_least(0)), "the slow rank")
          .required("the rank to slow down")
          .key("slowdown", &StragglerConfig::slowdown, real(Bounds::at_least(1)),
               "its compute takes this many times as long")
          .required("the factor its compute time is stretched by, >= 1");
  return s;
}

const Schema<ClusterConfig>& cluster_schema() {
  static const auto s =
      Schema<ClusterConfig>("cluster")
          .key("device", &ClusterConfig::device, choice({"cpu", "cuda", "auto"}),
               "auto: the GPU when one is usable (and says which it picked)")
          .key("comm", &ClusterConfig::comm, choice({"auto", "nccl", "mpi"}),
               "how GPU gradients travel: NCCL, or staged through pinned host memory")
          .key("tf32", &ClusterConfig::tf32, boolean(),
               "GPU: fp32 GEMMs and convolutions on TF32 tensor cores")
          .key("precision", &ClusterConfig::precision,
               enum_choice<DType>({{"fp32", DType::f32}, {"bf16", DType::bf16}}),
               "bf16: mixed precision as PyTorch's autocast (products in bf16 with f32 "
               "accumulation, bf16 activations; weights, gradients, optimizer in f32)")
          .key("threads_per_rank", &ClusterConfig::threads_per_rank, integer(Bounds::at_least(1)),
               "intra-op threads of each rank")
          .optional_section("link", &ClusterConfig::link, link_schema(),
                            "network EMULATION: every message waits latency + bytes/bandwidth",
                            "none (no network emulation)")
          .list("stragglers", &ClusterConfig::stragglers, straggler_schema(),
                "compute EMULATION: these ranks are slowed down")
          .key("timeout_s", &ClusterConfig::timeout_s, real(Bounds::above(0)),
               "a rank blocked this long on another one ends the job (exit 1, naming both)")
          .key(
              "memory_per_rank", &ClusterConfig::memory_per_rank, optional_of(size()),
              "what a rank may hold: a run whose estimated memory (the --dry-run table) exceeds it "
              "is refused at start (none: this host's available memory over its ranks)");
  return s;
}

const Schema<CompressionConfig>& compression_schema() {
  static const auto s =
      Schema<CompressionConfig>("compression")
          .key("name", &CompressionConfig::name, choice({"none", "truncate16", "quantize8"}),
               "codec of the gradient all-reduce, inside the ring");
  return s;
}

const Schema<ScheduleConfig>& schedule_schema() {
  static const auto s =
      Schema<ScheduleConfig>("schedule")
          .key("name", &ScheduleConfig::name, choice({"constant", "step", "multistep", "cosine"}),
               "learning-rate schedule over the epochs (cosine: over train.max_iterations when "
               "that is set)")
          .key("every_epochs", &ScheduleConfig::every_epochs, integer(Bounds::at_least(1)),
               "decay period")
          .only_for("name", {"step"})
          .key("gamma", &ScheduleConfig::gamma, real(Bounds::open_closed(0, 1)), "factor per decay")
          .only_for("name", {"step", "multistep"})
          .key("milestones", &ScheduleConfig::milestones, list_of(integer(Bounds::at_least(1))),
               "epochs at which to decay, increasing")
          .only_for("name", {"multistep"})
          .key("min_lr", &ScheduleConfig::min_lr, real(Bounds::at_least(0)),
               "the floor reached at the last epoch (or iteration of train.max_iterations)")
          .only_for("name", {"cosine"})
          .key("warmup_epochs", &ScheduleConfig::warmup_epochs, real(Bounds::at_least(0)),
               "linear warm-up in front of any schedule (fractions allowed)")
          .key("warmup_start_factor", &ScheduleConfig::warmup_start_factor,
               real(Bounds::open_closed(0, 1)), "warmup_epochs' warm-up starts at this × lr")
          .key("warmup_iterations", &ScheduleConfig::warmup_iterations,
               integer64(Bounds::at_least(0)),
               "linear warm-up over the first N iterations of the run, as nanoGPT's: lr·(it + "
               "1)/(N + 1) at iteration it (0-based); a cosine starts after it");
  return s;
}

const Schema<OptimizerConfig>& optimizer_schema() {
  static const auto s =
      Schema<OptimizerConfig>("optimizer")
          .key("name", &OptimizerConfig::name, choice(optimizer_names()),
               "the optimizer (the table of optimizers above); its own keys follow lr")
          .key("lr", &OptimizerConfig::lr, real(Bounds::above(0)), "learning rate")
          .row_keys("name", &OptimizerConfig::options, optimizer_row_keys)
          .key("clip_grad_norm", &OptimizerConfig::clip_grad_norm, real(Bounds::at_least(0)),
               "clip the whole model's gradient to this global L2 norm before each step, as "
               "torch.nn.utils.clip_grad_norm_ (0: off)")
          .key("freeze_layers", &OptimizerConfig::freeze_layers, integer(Bounds::at_least(0)),
               "the first N layers with parameters are not trained (nor communicated)")
          .section("schedule", &OptimizerConfig::schedule, schedule_schema(),
                   "the learning rate over the epochs");
  return s;
}

const Schema<TrainConfig>& train_schema() {
  static const auto s =
      Schema<TrainConfig>("train")
          .key("epochs", &TrainConfig::epochs, integer(Bounds::at_least(1)),
               "passes over the training set")
          .key("eval_every_epochs", &TrainConfig::eval_every_epochs, integer(Bounds::at_least(1)),
               "evaluate every N epochs (and always at the end)")
          .key("eval_every_iterations", &TrainConfig::eval_every_iterations,
               integer64(Bounds::at_least(0)),
               "also evaluate every N iterations of the run (0: at epoch ends only)")
          .key("max_iterations", &TrainConfig::max_iterations, integer64(Bounds::at_least(0)),
               "stop after this many iterations (0: no limit); a cosine schedule then spans them")
          .key("log_every_iterations", &TrainConfig::log_every_iterations,
               integer64(Bounds::at_least(0)), "progress line period (0: chosen automatically)")
          .key("accumulation_steps", &TrainConfig::accumulation_steps, integer(Bounds::at_least(1)),
               "micro-batches per optimizer step: each rank's batch is split into this many, run "
               "forward and backward one after another with their gradients summed, and "
               "communicated and applied once (dataset.batch_size stays the step's batch)");
  return s;
}

// The window of output.trace, when it is a map.
const Schema<TraceConfig>& trace_window_schema() {
  static const auto s =
      Schema<TraceConfig>("output.trace")
          .key("epochs", &TraceConfig::epochs, list_of(integer(Bounds::at_least(1)), 2),
               "record only epochs [first, last] (1-based)")
          .key("iterations", &TraceConfig::iterations, list_of(integer64(Bounds::at_least(1)), 2),
               "record only iterations [first, last] (1-based, counted over the run)");
  return s;
}

void read_trace(Section& output, OutputConfig& o) {
  const YAML::Node node = output.get("trace");
  const std::string path = output.path_of("trace");
  Reader& r = output.reader();
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    read_bool(r, path, node, o.trace.enabled);
    return;
  }
  Section window = output.child("trace");
  trace_window_schema().read(window, o.trace);
  o.trace.enabled = true;
  const TraceConfig& t = o.trace;
  if (!t.epochs.empty() && !t.iterations.empty())
    r.add(path, "give `epochs` or `iterations`, not both", node);
  if (t.epochs.size() == 2 && t.epochs[0] > t.epochs[1])
    r.add(path + ".epochs", "the first epoch comes after the last", node["epochs"]);
  if (t.iterations.size() == 2 && t.iterations[0] > t.iterations[1])
    r.add(path + ".iterations", "the first iteration comes after the last", node["iterations"]);
  if (t.epochs.empty() && t.iterations.empty())
    r.add(path, "a window needs `epochs: [first, last]` or `iterations: [first, last]`", node);
}

YAML::Node write_trace(const TraceConfig& t) {
  if (t.epochs.empty() && t.iterations.empty()) return YAML::Node(t.enabled);
  YAML::Node window(YAML::NodeType::Map);
  if (!t.epochs.empty()) window["epochs"] = flow(YAML::Node(t.epochs));
  if (!t.iterations.empty()) window["iterations"] = flow(YAML::Node(t.iterations));
  return flow(window);
}

const Schema<CheckpointConfig>& checkpoint_schema() {
  static const auto s =
      Schema<CheckpointConfig>("checkpoint")
          .key("every_epochs", &CheckpointConfig::every_epochs, integer(Bounds::at_least(0)),
               "a checkpoint after every N epochs (0: none at epoch ends)")
          .key("every_iterations", &CheckpointConfig::every_iterations,
               integer64(Bounds::at_least(0)),
               "also one every N iterations within an epoch (0: none)")
          .key("keep", &CheckpointConfig::keep, integer(Bounds::at_least(1)),
               "the newest N checkpoints stay; older ones are deleted");
  return s;
}

const Schema<OutputConfig>& output_schema() {
  static const auto s =
      Schema<OutputConfig>("output")
          .key("dir", &OutputConfig::dir, nonempty_text(),
               "where config.yaml, run.yaml and the CSVs go (--out overrides)")
          .fallback([](OutputConfig&) {}, "runs/<name>")  // load_config knows the name
          .custom(
              "trace", "false | true | map",
              "write trace.json (Chrome/Perfetto): every rank's threads and phases; a map "
              "records a window",
              read_trace, [](const OutputConfig& o, Style) { return write_trace(o.trace); },
              [] { return trace_window_schema().reference("output.trace"); })
          .fallback([](OutputConfig&) {}, "false");  // (for the reference: the default is off)
  return s;
}

// model.init_from, a key of the run beside the network's own (nn/spec.h reads those): asked
// for here, so that the model's reader takes it as known.
std::string read_init_from(Section& top) {
  std::string path;
  const YAML::Node model = top.get("model");
  if (!model.IsMap() || !model["init_from"].IsDefined()) return path;
  Section section = top.child("model");
  nonempty_text().read(top.reader(), "model.init_from", section.get("init_from"), path);
  return path;
}

KeyDoc init_from_doc() {
  return {"model.init_from",
          "non-empty text",
          "absent",
          false,
          "start from this weights file (safetensors, e.g. a run's model.safetensors) instead "
          "of the initialisation; every tensor's name and shape must match the model; with "
          "--resume the checkpoint's weights win",
          ""};
}

}  // namespace

const Schema<ExperimentConfig>& experiment_schema() {
  static const auto s =
      Schema<ExperimentConfig>("experiment")
          .key("name", &ExperimentConfig::name, nonempty_text(), "the experiment's name")
          .fallback(
              [](ExperimentConfig& c) {
                c.name = std::filesystem::path(c.source_path).stem().string();
              },
              "the file's stem")
          .key("seed", &ExperimentConfig::seed, natural(),
               "weights, data order, dropout, synthetic data")
          .custom(
              "model", "map",
              "a zoo model `name` and its options, or a custom `layers:` list (below)",
              [](Section& s, ExperimentConfig& c) {
                c.init_from = read_init_from(s);
                c.model = check_model_section(s);
              },
              [](const ExperimentConfig& c, Style) {
                YAML::Node model =
                    c.model.IsDefined() ? YAML::Clone(c.model) : YAML::Node(YAML::NodeType::Map);
                if (!c.init_from.empty()) model["init_from"] = c.init_from;
                return model;
              },
              [] {
                std::vector<KeyDoc> rows{init_from_doc()};
                for (KeyDoc& row : model_reference()) rows.push_back(std::move(row));
                return rows;
              })
          .custom(
              "dataset", "map", "the data: which, where, and how it is batched and loaded",
              [](Section& s, ExperimentConfig& c) {
                Section dataset = s.child("dataset");
                read_dataset(dataset, c.dataset);
              },
              [](const ExperimentConfig& c, Style style) {
                return write_dataset(c.dataset, style);
              },
              [] { return dataset_reference(); })
          .required("a map with at least `name`, e.g. {name: " + dataset_example() + "}")
          .section("cluster", &ExperimentConfig::cluster, cluster_schema(),
                   "the ranks' devices and threads, and what is emulated")
          .custom(
              "algorithm", "map", "the distributed algorithm and its own keys",
              [](Section& s, ExperimentConfig& c) {
                Section algorithm = s.child("algorithm");
                read_algorithm(algorithm, c.algorithm);
              },
              [](const ExperimentConfig& c, Style style) {
                return flow(write_algorithm(c.algorithm, style));
              },
              [] { return algorithm_reference(); })
          .section("compression", &ExperimentConfig::compression, compression_schema(),
                   "the gradient codec")
          .section("optimizer", &ExperimentConfig::optimizer, optimizer_schema(),
                   "the optimizer and its keys, gradient clipping and the learning-rate schedule")
          .section("train", &ExperimentConfig::train, train_schema(),
                   "how long, and how often to evaluate")
          .section("output", &ExperimentConfig::output, output_schema(), "where the results go")
          .optional_section("checkpoint", &ExperimentConfig::checkpoint, checkpoint_schema(),
                            "the training state in OUTPUT/checkpoints/, for --resume",
                            "none (no checkpoints)");
  return s;
}

}  // namespace dtrain
