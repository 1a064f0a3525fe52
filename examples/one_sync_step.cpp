// One data-parallel training step of dtrain, top to bottom, with the library's own types: the
// spine that every algorithm of lib/sched elaborates (docs/architecture.md, "One training
// iteration's path"). `sync` does exactly this, with the all-reduce on a thread of its own and
// overlapped with backward; here every part is in the open, one after another.
//
//   mpirun -np 2 build/examples/one_sync_step [EXPERIMENT.yaml]     (or one rank, without mpirun)
//
// Without an experiment file it trains the MLP on synthetic data. Each rank:
//   1. joins the job (MPI) and reads the experiment, every default filled in;
//   2. makes the backend, the training split and its share of every global batch;
//   3. builds the model (a zoo name → its layer list → a graph → flat buffers) and the optimizer;
//   4. steps: batch → forward → backward → all-reduce → optimizer step, a few times;
//   5. checks that every rank holds the same weights, and that the loss went down.
// It exits 0 when both hold (tests/app/test_example.sh runs it on 1 and 2 ranks).
#include <algorithm>  // min, max
#include <cmath>      // isfinite
#include <cstdio>     // printf: rank 0's lines
#include <string>
#include <vector>

#include "backend/backend.h"    // make_backend: oneDNN on the CPU, or the GPU
#include "comm/mpi_comm.h"      // init_mpi, make_mpi_comm: the ranks
#include "core/error.h"         // Error, InputError
#include "data/dataset.h"       // open_dataset: the samples of one split
#include "data/loader.h"        // Loader: this rank's rows of each global batch
#include "nn/model.h"           // build_model: the zoo's layer list → Graph → Model
#include "optim/lr_schedule.h"  // LrSchedule: the learning rate of an iteration
#include "run/config.h"         // load_config, parse_config: the experiment
#include "run/run_options.h"    // backend_options, train_loader_options, make_optimizer

using namespace dtrain;

namespace {

// What an experiment file would say; `dtrain keys` lists every key and its default.
constexpr const char* kExperiment = R"(
name: one_sync_step
model:     {name: mlp, hidden: [64]}
dataset:   {name: synthetic, shape: [1, 8, 8], classes: 4, train_size: 512, batch_size: 32}
cluster:   {device: cpu}
optimizer: {name: sgd, lr: 0.1, momentum: 0.9}
)";

constexpr int kSteps = 8;

// The mean of `value` over the ranks, and its spread (max − min): a collective.
struct Agreement {
  double mean = 0, spread = 0;
};
Agreement across_ranks(Comm& comm, double value) {
  std::vector<double> sums{value, 0.0};
  if (comm.rank() == 0) {
    double lo = value, hi = value;
    for (const auto& row : comm.gather({value}, 0))
      lo = std::min(lo, row[0]), hi = std::max(hi, row[0]);
    sums[1] = hi - lo;  // rank 0's answer; the sum below hands it to every rank
  } else {
    comm.gather({value}, 0);
  }
  comm.allreduce_sum(sums);
  return {sums[0] / comm.size(), sums[1]};
}

int train(int argc, char** argv) {
  // 1. The job and the experiment.
  init_mpi(&argc, &argv);
  const std::unique_ptr<Comm> comm = make_mpi_comm();
  const ExperimentConfig config =
      argc > 1 ? load_config({argv[1], {}, {}}) : parse_config(kExperiment, "one_sync_step");
  const bool talk = comm->rank() == 0;

  // 2. The backend, the training split and this rank's share of each global batch:
  // dataset.batch_size rows in all, batch_size / ranks of them on this rank.
  const std::unique_ptr<Backend> backend =
      make_backend(backend_options(config, comm->local_rank(), talk));
  const std::unique_ptr<Dataset> train_set =
      open_dataset(config.dataset, Split::train, config.seed);
  Loader loader(*train_set, train_loader_options(config, comm->rank(), comm->size()));

  // 3. The model, built for this rank's rows, its parameters and gradients each one flat buffer
  // (identical on every rank: the same seed), and the optimizer over them.
  const ModelInput input{train_set->sample_shape(), train_set->num_classes(), loader.local_batch(),
                         model_precision(config, *backend)};
  const std::unique_ptr<Model> model = build_model(*backend, config.model, input, config.seed);
  const std::unique_ptr<Optimizer> optimizer = make_optimizer(config, *model);
  const LrSchedule schedule(schedule_options(config));
  if (talk)
    std::printf("%s on %d rank(s): %s, %lld parameters, %s, %lld rows a rank\n",
                config.name.c_str(), comm->size(), backend->name().c_str(),
                static_cast<long long>(model->num_parameters()), optimizer->name().c_str(),
                static_cast<long long>(loader.local_batch()));

  // 4. The steps.
  loader.start_epoch(0);
  Batch batch;
  double first_loss = 0, loss = 0;
  for (int step = 0; step < kSteps && loader.next(batch); ++step) {
    // Forward and backward of this rank's rows, the loss scaled by 1 / (rows · ranks), so that
    // the ranks' gradients sum to the gradient of the global batch's mean loss.
    model->forward(batch.images, batch.labels);
    model->backward(1.0f / static_cast<float>(batch.rows() * comm->size()));
    // The all-reduce: every rank gets the sum, the global batch's gradient (sync runs this ring
    // on its comm thread, segment by segment as backward finishes them).
    backend->synchronize();
    comm->allreduce_sum(model->gradients());
    // The optimizer's step, the same on every rank: the weights stay identical.
    optimizer->step(static_cast<float>(schedule.lr_at(0.0, step)));

    const LossStats stats = model->last_stats();  // this rank's rows, before the step
    loss = across_ranks(*comm, stats.loss_sum / static_cast<double>(batch.rows())).mean;
    if (step == 0) first_loss = loss;
    if (talk) std::printf("step %d: loss %.4f (mean over the ranks)\n", step + 1, loss);
  }

  // 5. The checks: one model on every rank, and it learned.
  const Tensor weights = model->parameters();
  const double checksum = backend->dot(weights, weights);  // a fixed-order sum: equal bits
  const Agreement same = across_ranks(*comm, checksum);
  const bool identical = same.spread == 0.0, learned = std::isfinite(loss) && loss < first_loss;
  if (talk)
    std::printf("weights %s on every rank (|w|² %.6f); loss %.4f → %.4f: %s\n",
                identical ? "identical" : "DIFFER", same.mean, first_loss, loss,
                learned ? "learned" : "did NOT learn");
  return identical && learned ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return train(argc, argv);
  } catch (const InputError& e) {
    std::fprintf(stderr, "one_sync_step: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "one_sync_step: %s\n", e.what());
    return 1;
  }
}
