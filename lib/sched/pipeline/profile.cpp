#include "sched/pipeline/profile.h"

#include <memory>

#include "core/error.h"
#include "core/timer.h"                  // Clock, seconds_since
#include "optim/optimizer.h"             // Optimizer: each piece's update (the run's optimizer)
#include "sched/pipeline/stage_model.h"  // StageModel: each piece as a stage runs it

namespace dtrain {

std::vector<LayerProfile> profile_pipeline_chain(Backend& backend, const ModelSource& source,
                                                 Loader& loader,
                                                 const ChainProfileOptions& options) {
  ModelInput input = source.input;
  input.batch = source.batch_size;
  const std::vector<StageSlice> pieces =
      split_model(source.spec, input, model_stage_boundaries(source.spec, input));
  const size_t n = pieces.size();
  std::vector<std::unique_ptr<StageModel>> models;
  std::vector<std::unique_ptr<Optimizer>> optimizers;
  std::vector<LayerProfile> profile(n);
  for (size_t k = 0; k < n; ++k) {
    models.push_back(std::make_unique<StageModel>(backend, pieces[k], input, source.seed, 1, k == 0,
                                                  k + 1 == n));
    optimizers.push_back(make_optimizer(source.optimizer, backend, models[k]->parameters(),
                                        models[k]->gradients(), models[k]->weight_slots()));
    LayerProfile& p = profile[k];
    p.name = pieces[k].first_layer;
    // What crosses the link after this piece: bf16 between the pieces of a bf16 model.
    p.activation_bytes = static_cast<double>(dtype_size(models[k]->output_dtype())) *
                         static_cast<double>(models[k]->output_shape().numel());
    p.parameter_bytes = 4.0 * static_cast<double>(models[k]->num_parameters());
  }

  auto timed = [&backend](double& sink, bool keep, auto&& f) {
    const auto start = Clock::now();
    f();
    backend.synchronize();
    if (keep) sink += seconds_since(start);
  };
  int64_t epoch = 0;
  loader.start_epoch(epoch);
  Batch batch;
  std::vector<Tensor> gradients(n);
  int timed_iterations = 0;
  const auto start = Clock::now();
  for (int i = 0; i < options.warmup + options.iterations; ++i) {
    if (timed_iterations >= options.at_least && seconds_since(start) > options.budget_s) break;
    const auto taking = Clock::now();
    if (!loader.next(batch)) {
      loader.start_epoch(++epoch);
      DTRAIN_CHECK(loader.next(batch)) << "the loader has no minibatch to profile with";
    }
    if (i >= options.warmup) profile[0].forward_s += seconds_since(taking);
    const int64_t rows = batch.rows();
    DTRAIN_CHECK(rows == source.batch_size)
        << "profiling minibatches of " << source.batch_size << " rows, the loader gave " << rows;
    const bool keep = i >= options.warmup;
    Tensor activation = batch.images;
    for (size_t k = 0; k < n; ++k)
      timed(profile[k].forward_s, keep, [&] {
        activation = models[k]->forward(0, static_cast<uint64_t>(i), activation, batch.labels);
        if (k + 1 == n) models[k]->last_stats(0);  // the output stage reads the loss
      });
    Tensor gradient;
    for (size_t k = n; k-- > 0;)
      timed(profile[k].backward_s, keep, [&] {
        gradient = models[k]->backward(0, gradient, 1.0f / static_cast<float>(rows));
        optimizers[k]->step(1e-4f);  // only its cost matters
      });
    timed_iterations += keep;
  }
  DTRAIN_CHECK(timed_iterations > 0) << "no minibatch was timed";
  for (LayerProfile& p : profile) {
    p.forward_s /= timed_iterations;
    p.backward_s /= timed_iterations;
  }
  return profile;
}

}  // namespace dtrain
