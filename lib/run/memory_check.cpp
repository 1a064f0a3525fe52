#include "run/memory_check.h"

#include <fmt/format.h>

#include <algorithm>  // max, min

#include "core/error.h"
#include "nn/model.h"         // count_parameters, estimate_activation_bytes, model_weight_slots
#include "run/host_memory.h"  // available_host_memory
#include "sched/algorithm.h"  // shard_mode, gradient_segment_bounds

namespace dtrain {

namespace {

// Where optimizer.freeze_layers' frozen prefix ends, from the weights by name (forward order,
// "<layer>.<tensor>"): the first parameter of the first layer left trainable — what
// Model::trainable_offset gives once built.
int64_t frozen_prefix(const std::vector<WeightSlot>& slots, int frozen_layers, int64_t parameters) {
  if (frozen_layers <= 0) return 0;
  int layers = 0;
  std::string last;
  for (const WeightSlot& slot : slots) {
    if (slot.buffer) continue;
    const std::string layer = slot.name.substr(0, slot.name.rfind('.'));
    if (layer == last) continue;
    if (layers++ == frozen_layers) return slot.offset;
    last = layer;
  }
  return parameters;  // every layer frozen: build_run refuses it (freeze_layers)
}

std::string row(const char* kind, int64_t bytes, const std::string& note = "") {
  return fmt::format("  {:<14}{:>11}  {:>16}{}\n", kind, human_bytes(bytes), bytes,
                     note.empty() ? "" : "  " + note);
}

}  // namespace

bool memory_modelled(const ExperimentConfig& config) {
  return !config.algorithm.entry().model_parallel.has_value();
}

bool configured_recompute(const ExperimentConfig& c) {
  const YAML::Node recompute = c.model["recompute"];  // the checked spec always has it
  return recompute && recompute.as<std::string>() == "blocks";
}

int64_t build_batch(const ExperimentConfig& c, int ranks) {
  const int64_t steps = c.train.accumulation_steps;
  const int64_t train = c.dataset.batch_size / ranks, test = c.dataset.test_batch_size / ranks;
  return steps > 1 ? train / steps : std::max(train, test);
}

MemoryInputs memory_inputs(const ExperimentConfig& c, const ModelInput& like, int ranks,
                           ShardMode shard) {
  ModelInput input = like;
  input.batch = std::max<int64_t>(1, build_batch(c, ranks));
  MemoryInputs in;
  in.parameters = count_parameters(c.model, input);
  const std::vector<WeightSlot> slots = model_weight_slots(c.model, input);
  for (const WeightSlot& slot : slots)
    if (slot.buffer) in.buffer_elements += slot.shape.numel();
  in.trainable_offset = frozen_prefix(slots, c.optimizer.freeze_layers, in.parameters);
  in.optimizer_states = optimizer_state_floats(c.optimizer);
  in.ranks = ranks;
  in.shard = shard;
  in.segments = gradient_segment_bounds(c.algorithm, in.trainable_offset, in.parameters);
  in.layer_reads = model_weight_reads(c.model, input);
  in.accumulation_steps = c.train.accumulation_steps;
  in.codec = c.compression.name != "none";
  in.activations = estimate_activation_bytes(c.model, input, false);
  in.activations_recompute = estimate_activation_bytes(c.model, input, true);
  in.recompute = configured_recompute(c);
  return in;
}

MemoryLimit memory_limit(const ExperimentConfig& c, const Backend& backend, int local_ranks) {
  if (c.cluster.memory_per_rank)
    return {static_cast<int64_t>(c.cluster.memory_per_rank->bytes),
            "cluster.memory_per_rank " + c.cluster.memory_per_rank->text};
  // A GPU rank holds the model in its device's memory (one device per rank: its local rank's).
  if (const int64_t device = backend.device_memory_bytes(); device > 0)
    return {device, fmt::format("the device's {}", human_bytes(device))};
  const std::optional<int64_t> available = available_host_memory();
  if (!available) return {};
  const int sharing = std::max(1, local_ranks);
  return {*available / sharing,
          sharing == 1 ? fmt::format("this host's available {}", human_bytes(*available))
                       : fmt::format("this host's available {} / {} ranks", human_bytes(*available),
                                     sharing)};
}

MemoryReport memory_report(const ExperimentConfig& c, const ModelInput& like,
                           const Backend& backend, const MemoryPlace& place) {
  MemoryReport report;
  report.inputs = memory_inputs(c, like, place.ranks, shard_mode(c.algorithm));
  report.inputs.releases = backend.releases_memory();
  report.rank = largest_rank_memory(report.inputs);
  report.limit = memory_limit(c, backend, place.local_ranks);
  if (report.fits()) return report;
  // The least change that fits, without recomputation and with it: the first shard mode (in
  // the order none, optimizer, gradients, parameters) whose largest rank fits.
  const bool shardable = static_cast<bool>(c.algorithm.entry().shard);
  for (const bool recompute : {false, true}) {
    for (size_t m = 0; m < shard_words().size(); ++m) {
      const ShardMode mode = static_cast<ShardMode>(m);
      if (!shardable && mode != report.inputs.shard) continue;
      if (shardable && mode > c.algorithm.entry().deepest_shard) continue;
      MemoryInputs in = report.inputs;
      in.shard = mode;
      const int64_t total = largest_rank_memory(in).total_with(recompute);
      if (total > report.limit.bytes) continue;
      std::string change;
      if (mode != report.inputs.shard)
        change = fmt::format("algorithm.shard: {}", shard_word(mode));
      if (recompute != report.inputs.recompute)
        change += (change.empty() ? "" : " with ") +
                  std::string(recompute ? "model.recompute: blocks" : "model.recompute: none");
      if (!change.empty()) report.would_fit.push_back(change + " (" + human_bytes(total) + ")");
      break;
    }
  }
  return report;
}

std::string memory_table(const MemoryReport& report) {
  const MemoryInputs& in = report.inputs;
  const RankMemory& m = report.rank;
  std::string text = fmt::format(
      "memory   per rank of {} (algorithm.shard: {}{}), before it is built:\n", in.ranks,
      shard_word(in.shard),
      in.shard == ShardMode::none || in.ranks == 1 ? ""
                                                   : fmt::format("; rank {} holds most", m.rank));
  text += fmt::format("  {:<14}{:>11}  {:>16}\n", "kind", "size", "bytes");
  text += row("weights", m.weights);
  text += row("gradients", m.gradients);
  text += row("optimizer", m.optimizer,
              fmt::format("{} state float{} per parameter", in.optimizer_states,
                          in.optimizer_states == 1 ? "" : "s"));
  text += row("buffers", m.buffers);
  text += row("accumulation", m.accumulation);
  text += row("working set", m.working_set,
              in.shard == ShardMode::none ? "" : "segments gathered and in flight");
  text += row("activations", m.recompute ? m.activations_recompute : m.activations,
              m.recompute ? "model.recompute: blocks" : "model.recompute: none");
  text += row("total", m.total());
  text += fmt::format("  recomputing: activations {}, total {} ({} bytes) with {}\n",
                      human_bytes(m.recompute ? m.activations : m.activations_recompute),
                      human_bytes(m.total_with(!m.recompute)), m.total_with(!m.recompute),
                      m.recompute ? "model.recompute: none" : "model.recompute: blocks");
  if (report.limit.bytes > 0)
    text += fmt::format("  limit {} ({} bytes, {}): {}\n", human_bytes(report.limit.bytes),
                        report.limit.bytes, report.limit.source,
                        report.fits() ? "fits" : "does NOT fit");
  else
    text += "  limit unknown (no cluster.memory_per_rank, no /proc/meminfo): not checked\n";
  return text;
}

void check_memory(const MemoryReport& report, const std::string& source_path) {
  if (report.fits()) return;
  std::string advice =
      report.would_fit.empty()
          ? fmt::format(
                "nothing fits on {} ranks: more ranks, a smaller dataset.batch_size or a "
                "larger cluster.memory_per_rank",
                report.inputs.ranks)
          : "would fit: " + fmt::format("{}", fmt::join(report.would_fit, "; "));
  throw InputError(fmt::format(
      "{}: cluster.memory_per_rank: the run needs {} ({} bytes) on a rank, more than {} ({}): "
      "refused before the model is allocated; {}\n{}",
      source_path, human_bytes(report.rank.total()), report.rank.total(),
      human_bytes(report.limit.bytes), report.limit.source, advice, memory_table(report)));
}

}  // namespace dtrain
