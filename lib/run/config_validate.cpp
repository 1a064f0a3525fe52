// Cross-setting rules (see config_validate.h).
#include "run/config_validate.h"

#include <fmt/format.h>  // fmt::format: messages
#include <unistd.h>      // sysconf: the cores, for threads_per_rank

#include <map>  // straggler ranks seen

#include "data/dataset_section.h"  // check_dataset: the dataset's own rules
#include "sched/algorithm.h"       // AlgorithmEntry: whether the chosen algorithm is model parallel

namespace dtrain::config {

namespace {

void check_stragglers(const ClusterConfig& c, Reader& r) {
  std::map<int, size_t> seen;  // rank → first entry
  for (size_t i = 0; i < c.stragglers.size(); ++i) {
    std::string path = fmt::format("cluster.stragglers[{}].rank", i);
    if (r.has_problem(path)) continue;
    auto [it, fresh] = seen.emplace(c.stragglers[i].rank, i);
    if (!fresh)
      r.add(path,
            fmt::format("rank {} is already listed as stragglers[{}]", it->first, it->second));
  }
}

// The schedule's rules (an optimizer's own keys are judged by its row: optimizer_table.h).
void check_optimizer(const OptimizerConfig& o, Reader& r) {
  const ScheduleConfig& s = o.schedule;
  const std::string milestones = "optimizer.schedule.milestones";
  if (!r.has_problem(milestones)) {
    if (s.name == "multistep" && s.milestones.empty())
      r.add(milestones, "required for schedule 'multistep': a non-empty list of epochs");
    for (size_t i = 1; i < s.milestones.size(); ++i)
      if (s.milestones[i] <= s.milestones[i - 1])
        r.add(fmt::format("{}[{}]", milestones, i),
              fmt::format("milestones must increase: {} follows {}", s.milestones[i],
                          s.milestones[i - 1]));
  }
  if (s.warmup_epochs > 0 && s.warmup_iterations > 0 &&
      !r.has_problem("optimizer.schedule.warmup_epochs") &&
      !r.has_problem("optimizer.schedule.warmup_iterations"))
    r.add("optimizer.schedule.warmup_iterations",
          fmt::format("give warmup_epochs ({}) or warmup_iterations ({}), not both",
                      s.warmup_epochs, s.warmup_iterations));
  // Cosine anneals from lr down to min_lr; a floor above the start would anneal upwards.
  if (s.name == "cosine" && s.min_lr > o.lr && !r.has_problem("optimizer.schedule.min_lr") &&
      !r.has_problem("optimizer.lr"))
    r.add(
        "optimizer.schedule.min_lr",
        fmt::format("must be <= optimizer.lr ({}) for schedule 'cosine', got {}", o.lr, s.min_lr));
}

// train.accumulation_steps, as far as the file tells: the global batch must split into equal
// micro-batches (each rank's share is judged when the ranks are known), and a model-parallel
// algorithm pipelines micro-batches of its own (algorithm.microbatches) instead.
void check_accumulation(const ExperimentConfig& c, const AlgorithmEntry& algorithm, Reader& r) {
  const int steps = c.train.accumulation_steps;
  if (steps <= 1 || r.has_problem("train.accumulation_steps")) return;
  if (algorithm.model_parallel) {
    r.add("train.accumulation_steps",
          fmt::format("algorithm {} splits its minibatch into algorithm.microbatches of its own "
                      "and does not accumulate across steps; set it to 1 (got {})",
                      algorithm.name, steps));
    return;
  }
  if (!r.has_problem("dataset.batch_size") && c.dataset.batch_size % steps != 0)
    r.add("train.accumulation_steps",
          fmt::format("{} does not divide dataset.batch_size {} into equal micro-batches", steps,
                      c.dataset.batch_size));
}

// Settings that are valid but will have no effect here.
void check_cluster(const ClusterConfig& c, Reader& r) {
  if (c.tf32 && c.device == "cpu")
    r.warn("cluster.tf32", "has no effect on a CPU run (cluster.device: cpu)");
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0 && c.threads_per_rank > cores && !r.has_problem("cluster.threads_per_rank"))
    r.warn("cluster.threads_per_rank",
           fmt::format("{} threads per rank, but this machine has {} cores: they will take turns",
                       c.threads_per_rank, cores));
}

void check_trace_window(const ExperimentConfig& c, Reader& r) {
  const std::vector<int>& epochs = c.output.trace.epochs;
  if (epochs.size() == 2 && epochs[0] > c.train.epochs && !r.has_problem("output.trace"))
    r.warn("output.trace.epochs",
           fmt::format("the window starts after the last epoch (train.epochs: {}): the trace "
                       "will hold no spans",
                       c.train.epochs));
}

}  // namespace

void check_cross_setting_rules(const ExperimentConfig& config, Reader& reader) {
  check_trace_window(config, reader);
  check_dataset(config.dataset, reader);
  check_stragglers(config.cluster, reader);
  check_cluster(config.cluster, reader);
  check_optimizer(config.optimizer, reader);
  check_accumulation(config, config.algorithm.entry(), reader);
}

}  // namespace dtrain::config
