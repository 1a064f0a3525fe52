#include "run/run_options.h"

#include "core/error.h"  // DTRAIN_INPUT_CHECK

namespace dtrain {

BackendOptions backend_options(const ExperimentConfig& c, int local_rank, bool announce) {
  BackendOptions o;
  o.local_rank = local_rank;
  o.announce = announce;
  o.device = c.cluster.device == "cpu"    ? DeviceChoice::cpu
             : c.cluster.device == "cuda" ? DeviceChoice::cuda
                                          : DeviceChoice::auto_;
  o.threads = c.cluster.threads_per_rank;
  o.allow_tf32 = c.cluster.tf32;
  return o;
}

DType model_precision(const ExperimentConfig& c, const Backend& backend) {
  if (c.cluster.precision == DType::f32) return DType::f32;
  const std::string why = backend.bf16_unavailable();
  DTRAIN_INPUT_CHECK(why.empty()) << c.source_path << ": cluster.precision: bf16: " << why
                                  << "; use precision: fp32 here";
  return DType::bf16;
}

LoaderOptions train_loader_options(const ExperimentConfig& c, int rank, int world) {
  LoaderOptions o;
  o.global_batch = c.dataset.batch_size;
  o.rank = rank;
  o.world = world;
  o.seed = c.seed;
  o.shuffle = true;
  o.drop_last = true;
  o.prefetch = c.dataset.prefetch;
  o.workers = c.dataset.workers;
  return o;
}

LoaderOptions test_loader_options(const ExperimentConfig& c, int rank, int world) {
  LoaderOptions o = train_loader_options(c, rank, world);
  o.global_batch = c.dataset.test_batch_size;
  o.shuffle = false;
  o.drop_last = false;
  o.trace_name = "test loader";
  return o;
}

std::string nearest_batches(int64_t batch, int ranks) {
  const int64_t below = batch / ranks * ranks, above = below + ranks;
  if (below <= 0) return std::to_string(above);
  return std::to_string(below) + " or " + std::to_string(above);
}

std::unique_ptr<Optimizer> make_optimizer(const ExperimentConfig& c, Model& model) {
  return make_optimizer(c.optimizer, model.backend(), model.parameters(), model.gradients(),
                        model.weight_slots(), model.trainable_offset());
}

LrScheduleOptions schedule_options(const ExperimentConfig& c) {
  const ScheduleConfig& s = c.optimizer.schedule;
  LrScheduleOptions o;
  o.name = s.name;
  o.base_lr = c.optimizer.lr;
  o.every_epochs = s.every_epochs;
  o.gamma = s.gamma;
  o.milestones = s.milestones;
  o.min_lr = s.min_lr;
  o.total_epochs = c.train.epochs;
  o.warmup_epochs = s.warmup_epochs;
  o.warmup_start_factor = s.warmup_start_factor;
  o.warmup_iterations = s.warmup_iterations;
  o.total_iterations = c.train.max_iterations;
  return o;
}

double compute_slowdown(const ExperimentConfig& c, int rank) {
  double slowdown = 1.0;
  for (size_t i = 0; i < c.cluster.stragglers.size(); ++i) {
    const StragglerConfig& s = c.cluster.stragglers[i];
    if (s.rank == rank) slowdown = s.slowdown;
  }
  return slowdown;
}

std::optional<LinkModel> emulated_link(const ExperimentConfig& c) {
  if (!c.cluster.link) return std::nullopt;
  return LinkModel{c.cluster.link->bandwidth.bytes_per_s, c.cluster.link->latency.seconds};
}

void freeze_layers(const ExperimentConfig& c, Model& model) {
  const int frozen = c.optimizer.freeze_layers;
  if (frozen <= 0) return;
  const int layers = static_cast<int>(model.layer_ranges().size());
  DTRAIN_INPUT_CHECK(frozen < layers)
      << c.source_path << ": optimizer.freeze_layers: " << frozen
      << " would freeze every layer with parameters (the model has " << layers << ")";
  model.freeze_first(frozen);
}

}  // namespace dtrain
