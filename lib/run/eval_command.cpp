#include "run/eval_command.h"

#include <fmt/format.h>

#include <algorithm>  // max

#include "core/error.h"
#include "data/dataset.h"      // open_dataset
#include "data/loader.h"       // Loader
#include "nn/model_weights.h"  // load_model_weights
#include "run/run_options.h"   // backend and loader options of the config
#include "sched/scheduler.h"   // test_sums: evaluation as training evaluates

namespace dtrain {

EvalReport evaluate_weights(const ExperimentConfig& config, const std::string& weights) {
  const std::string key = "--weights " + weights;
  NamedTensors tensors;
  try {
    tensors = read_safetensors(weights);
  } catch (const InputError& e) {
    throw InputError("--weights: " + std::string(e.what()));
  }
  const auto backend = make_backend(backend_options(config, 0, /*announce=*/false));
  const auto test_set = open_dataset(config.dataset, Split::test, config.seed);
  LoaderOptions loading = test_loader_options(config, 0, 1);
  loading.allocator = &backend->host_allocator();
  loading.device = backend.get();
  Loader test(*test_set, loading);
  // Built for the batch a one-process run builds for (the larger of its batches), so that the
  // test batches run through the same plans as in training's evaluation.
  const ModelInput input{test_set->sample_shape(), test_set->num_classes(),
                         std::max<int64_t>(config.dataset.batch_size, test.local_batch()),
                         model_precision(config, *backend)};
  const auto model = build_model(*backend, config.model, input, config.seed);
  load_model_weights(*model, tensors, key);
  const LossStats sums = test_sums(*model, test);
  EvalReport report;
  report.samples = sums.count;
  if (sums.count > 0) {
    report.loss = sums.loss_sum / static_cast<double>(sums.count);
    report.acc = sums.correct / static_cast<double>(sums.count);
  }
  return report;
}

std::string eval_line(const EvalReport& report) {
  return fmt::format("test loss {:.6f} acc {:.6f} ({} samples)", report.loss, report.acc,
                     report.samples);
}

}  // namespace dtrain
