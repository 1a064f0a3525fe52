// A small data-parallel training set-up for scheduler tests, assembled by the run builder as
// training does: synthetic data (deterministic order for a seed), an MLP, momentum SGD with
// weight decay, and the scheduler of one algorithm on a Comm.
#pragma once
#include <fmt/format.h>

#include <algorithm>  // max
#include <cmath>
#include <cstring>     // memcpy, memcmp
#include <functional>  // the per-iteration callback
#include <memory>
#include <stdexcept>  // gradient_at past the epoch's end
#include <string>
#include <vector>

#include "comm/comm.h"
#include "run/config.h"
#include "run/run_builder.h"

namespace dtrain::test {

constexpr float kMomentum = 0.9f, kWeightDecay = 1e-4f, kLr = 0.1f;

struct TraineeOptions {
  std::string algorithm = "sync";
  std::string compression = "none";
  std::string keys;           // the algorithm's own keys, YAML flow entries: "K: 2, segments: 3"
  int64_t global_batch = 24;  // divisible by 1, 2, 3, 4
  int64_t train_size = 480;
  std::string device = "cpu";  // cuda: GPU local_rank (tests/sched GPU tests)
  float momentum = kMomentum, weight_decay = kWeightDecay, lr = kLr;
  std::string model = "{name: mlp, hidden: [16]}";
  std::string shape = "[1, 6, 6]";  // of a synthetic sample
  std::string stragglers = "[]";    // cluster.stragglers
  // optimizer: sgd (momentum, weight_decay), or adamw; `optimizer_keys` are more of its keys
  // ("eps: 1e-3", "clip_grad_norm: 0.5")
  std::string optimizer = "sgd";
  std::string optimizer_keys;
  int accumulation_steps = 1;  // train.accumulation_steps
};

// The experiment a Trainee runs, as a user would write it.
inline std::string trainee_yaml(const TraineeOptions& o) {
  const std::string optimizer =
      o.optimizer == "sgd"
          ? fmt::format("{{lr: {}, momentum: {}, weight_decay: {}{}{}}}", o.lr, o.momentum,
                        o.weight_decay, o.optimizer_keys.empty() ? "" : ", ", o.optimizer_keys)
          : fmt::format("{{name: {}, lr: {}, weight_decay: {}{}{}}}", o.optimizer, o.lr,
                        o.weight_decay, o.optimizer_keys.empty() ? "" : ", ", o.optimizer_keys);
  return fmt::format(
      "name: trainee\nseed: 5\nmodel: {}\n"
      "dataset: {{name: synthetic, shape: {}, classes: 3, train_size: {}, batch_size: {}}}\n"
      "cluster: {{device: {}, stragglers: {}}}\n"
      "algorithm: {{name: {}{}{}}}\ncompression: {{name: {}}}\n"
      "optimizer: {}\ntrain: {{accumulation_steps: {}}}\n",
      o.model, o.shape, o.train_size, o.global_batch, o.device, o.stragglers, o.algorithm,
      o.keys.empty() ? "" : ", ", o.keys, o.compression, optimizer, o.accumulation_steps);
}

struct Trainee {
  std::unique_ptr<Run> run;
  std::unique_ptr<Scheduler> sched;
  Backend* backend;
  Loader* loader;
  Model* model;

  // `on_iteration`: called after each update (the step's gradient is still in the model).
  Trainee(Comm& comm, const TraineeOptions& o,
          std::function<void(const IterationReport&)> on_iteration = {})
      : run(build_run(parse_config(trainee_yaml(o), "trainee.yaml"),
                      {comm.rank(), comm.size(), comm.local_rank(), false})),
        sched(build_scheduler(*run, comm, std::move(on_iteration))),
        backend(run->backend.get()),
        loader(run->train_loader.get()),
        model(run->model.get()) {}
  // `iterations` more iterations of `epoch` (0: to its end), continuing the loader's epoch.
  EpochStats train(int epoch, int iterations) {
    return sched->run_epoch(*loader, epoch, iterations);
  }
  void start_epoch(int epoch) { loader->start_epoch(epoch); }
  const float* weights() const { return model->parameters().data<float>(); }  // CPU only
  // The weights in host memory, wherever they live.
  std::vector<float> host_weights() const {
    std::vector<float> w(static_cast<size_t>(size()));
    backend->copy(Tensor::borrow(w.data(), Shape{size()}), model->parameters());
    backend->synchronize();
    return w;
  }
  int64_t size() const { return model->num_parameters(); }
};

// For hand-written references: the gradient of `t`'s next batch at the weights `w` (host values,
// CPU only), with the summed loss scaled by 1 / rows (`mean`) or not. Returns the model's
// gradient buffer; `rows` gets the batch's rows.
inline const float* gradient_at(Trainee& t, const std::vector<float>& w, bool mean,
                                int64_t* rows = nullptr) {
  Batch batch;
  if (!t.loader->next(batch)) throw std::runtime_error("gradient_at: the epoch has ended");
  Model& m = *t.model;
  std::memcpy(m.parameters().raw(), w.data(), w.size() * 4);
  m.forward(batch.images, batch.labels);
  m.backward(mean ? 1.0f / static_cast<float>(batch.labels.numel()) : 1.0f);
  if (rows) *rows = batch.labels.numel();
  return m.gradients().data<float>();
}

// Gives each rank a model of its own (deterministic values that differ by rank; CPU only): the
// decentralized algorithms' tests start from different models.
inline void make_distinct(Trainee& t, int rank) {
  float* w = t.model->parameters().data<float>();
  for (int64_t e = 0; e < t.size(); ++e) w[e] = static_cast<float>(std::sin(0.37 * e + 1.3 * rank));
}

// Largest absolute difference between two weight vectors.
inline double max_difference(const float* a, const float* b, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  return worst;
}
// ... between float values and a reference computed in double.
inline double max_difference(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// The values of a tensor in host memory (CPU only).
inline std::vector<float> host(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.raw(), t.bytes());
  return v;
}

// True when `v` is bit-identical on every rank (a collective).
inline bool identical_on_all_ranks(Comm& comm, const std::vector<float>& v) {
  std::vector<float> root = v;
  comm.broadcast(Tensor::borrow(root.data(), Shape{static_cast<int64_t>(root.size())}), 0);
  std::vector<double> differ{std::memcmp(root.data(), v.data(), v.size() * 4) != 0 ? 1.0 : 0.0};
  comm.allreduce_sum(differ);
  return differ[0] == 0;
}

}  // namespace dtrain::test
