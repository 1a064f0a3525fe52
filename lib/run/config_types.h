// The typed settings of an experiment file (docs/architecture.md §3): one plain struct per section,
// with the documented defaults inline so that a default-constructed struct *is* the default
// section. Each key's name, constraint and doc line are in config_schema.cpp, once.
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node: the resolved `model:` map

#include <cstdint>   // int64_t, uint64_t
#include <optional>  // ClusterConfig::link: absent means "no network emulation"
#include <string>
#include <vector>

#include "config/units.h"           // Rate, Duration
#include "core/dtype.h"             // DType: cluster.precision
#include "data/dataset_config.h"    // DatasetConfig: the shared keys and the chosen dataset's own
#include "optim/optimizer_table.h"  // OptimizerChoice: the chosen optimizer and its own keys
#include "sched/algorithm.h"        // AlgorithmConfig: the chosen algorithm and its own keys

namespace dtrain {

// Emulated network: every message is paced to this bandwidth and delayed by this latency.
struct LinkConfig {
  Rate bandwidth;    // bytes per second, and as written ("10Gbps")
  Duration latency;  // seconds, and as written ("20us")

  bool operator==(const LinkConfig&) const = default;
};

// A rank whose compute is stretched by `slowdown` (AD-PSGD's heterogeneous cluster).
struct StragglerConfig {
  int rank = 0;
  double slowdown = 1;

  bool operator==(const StragglerConfig&) const = default;
};

struct ClusterConfig {
  std::string device = "auto";   // cpu | cuda | auto
  std::string comm = "auto";     // GPU gradients: auto | nccl | mpi (host staging)
  bool tf32 = false;             // fp32 GEMMs and convolutions on TF32 tensor cores (CUDA)
  DType precision = DType::f32;  // fp32 | bf16: mixed precision as PyTorch's autocast
  int threads_per_rank = 1;
  std::optional<LinkConfig> link;  // absent: real network speed
  std::vector<StragglerConfig> stragglers;
  // A rank blocked this long on another one ends the job (exit 1, naming both): no hang.
  double timeout_s = 300;
  // What a rank may hold (docs/memory.md); absent: this host's available memory shared by the
  // ranks on it (a GPU's memory on a GPU).
  std::optional<ByteSize> memory_per_rank;

  bool operator==(const ClusterConfig&) const = default;
};

struct CompressionConfig {
  std::string name = "none";  // none | truncate16 | quantize8

  bool operator==(const CompressionConfig&) const = default;
};

struct ScheduleConfig {
  std::string name = "constant";  // constant | step | multistep | cosine
  int every_epochs = 30;          // step
  double gamma = 0.1;             // step, multistep: factor per decay
  std::vector<int> milestones;    // multistep: epochs at which to decay, increasing
  double min_lr = 0;              // cosine: the floor reached at the last epoch
  // Linear warm-up from warmup_start_factor·lr to lr, in front of any schedule; fractional
  // epochs are allowed because short runs warm up for part of an epoch.
  double warmup_epochs = 0;
  double warmup_start_factor = 0.1;
  // Linear warm-up over the first N iterations, as nanoGPT's: lr·(it + 1)/(N + 1) at iteration
  // it (0-based, counted over the run); a cosine then starts at iteration N.
  int64_t warmup_iterations = 0;

  bool operator==(const ScheduleConfig&) const = default;
};

// optimizer: the chosen optimizer and its own keys (OptimizerChoice: a row of the optimizer
// table), and the keys every optimizer shares.
struct OptimizerConfig : OptimizerChoice {
  double lr = 0.1;
  double clip_grad_norm = 0;  // the whole gradient's L2 norm is clipped to this; 0: off
  int freeze_layers = 0;      // the first N layers that have parameters stay fixed
  ScheduleConfig schedule;

  bool operator==(const OptimizerConfig&) const = default;
};

struct TrainConfig {
  int epochs = 5;
  int eval_every_epochs = 1;
  int64_t eval_every_iterations = 0;  // 0: at epoch ends only
  int64_t max_iterations = 0;         // 0: no limit
  int64_t log_every_iterations = 0;   // 0: chosen automatically
  // Micro-batches per optimizer step: each rank's share of dataset.batch_size is split into this
  // many, their gradients summed before the one communication and update of the step.
  int accumulation_steps = 1;

  bool operator==(const TrainConfig&) const = default;
};

// output.trace: false | true | {epochs: [first, last]} | {iterations: [first, last]}.
struct TraceConfig {
  bool enabled = false;
  // The window recorded, inclusive and 1-based (iterations counted over the run); both empty:
  // the whole run. At most one is set.
  std::vector<int> epochs;
  std::vector<int64_t> iterations;

  bool operator==(const TraceConfig&) const = default;
};

struct OutputConfig {
  std::string dir;  // defaults to runs/<name>
  TraceConfig trace;

  bool operator==(const OutputConfig&) const = default;
};

// checkpoint: (absent: none). Written after every `every_epochs` epochs and every
// `every_iterations` iterations (0: never), in OUTPUT/checkpoints/; the newest `keep` stay.
struct CheckpointConfig {
  int every_epochs = 1;
  int64_t every_iterations = 0;
  int keep = 2;

  bool operator==(const CheckpointConfig&) const = default;
};

struct ExperimentConfig {
  std::string name;  // defaults to the config file's stem
  uint64_t seed = 1;
  YAML::Node model;  // the resolved model map (after the model hook filled its defaults)
  // model.init_from: a weights file (safetensors) the run starts from; empty: the
  // initialisation. Kept apart from `model`, which describes the network only.
  std::string init_from;
  DatasetConfig dataset;
  ClusterConfig cluster;
  AlgorithmConfig algorithm;  // the registry's (lib/sched/algorithm.h)
  CompressionConfig compression;
  OptimizerConfig optimizer;
  TrainConfig train;
  OutputConfig output;
  std::optional<CheckpointConfig> checkpoint;
  std::string source_path;            // the config file it was loaded from
  std::vector<std::string> warnings;  // what loading found worth saying ("FILE:LINE: key: ...")
};

}  // namespace dtrain
