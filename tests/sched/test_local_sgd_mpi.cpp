// Local SGD on p ranks: with sync_period 1 it is sync (plain SGD) to rounding; with a longer
// period the ranks' models are identical right after each averaging and equal the average of
// the models before it (BatchNorm statistics included); evaluation uses the average without
// changing the training.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "comm/mpi_comm.h"
#include "trainee.h"

using namespace dtrain;
using test::host;
using test::identical_on_all_ranks;
using test::max_difference;
using test::Trainee;
using test::TraineeOptions;

namespace {

// A model with BatchNorm statistics, so that their averaging is checked too.
const char* kConvBn =
    "{layers: [{name: conv, type: conv2d, out_channels: 4, kernel: 3, padding: 1}, "
    "{name: bn, type: batchnorm2d}, {name: relu, type: relu}, {name: flat, type: flatten}, "
    "{name: fc, type: linear, out_features: 3}]}";

TraineeOptions local_sgd(int period, bool plain = false) {
  TraineeOptions o;
  o.algorithm = "local_sgd";
  o.keys = "sync_period: " + std::to_string(period);
  o.model = kConvBn;
  if (plain) o.momentum = 0, o.weight_decay = 0;
  return o;
}

// The mean over the ranks of `v`, in double.
std::vector<double> mean_over_ranks(Comm& comm, const std::vector<float>& v) {
  std::vector<double> sum(v.begin(), v.end());
  comm.allreduce_sum(sum);
  for (double& x : sum) x /= comm.size();
  return sum;
}

}  // namespace

// Local SGD written out on host vectors: each rank's momentum SGD with weight decay on its own
// batches (local mean loss), and every `period` steps the parameters and BatchNorm statistics
// replaced by their mean over the ranks. The Trainee only lends its loader and model for the
// gradients.
class LocalSgdReference {
 public:
  LocalSgdReference(Comm& comm, int period)
      : comm_(comm), t_(comm, local_sgd(period)), period_(period) {
    w_ = host(t_.model->parameters());
    v_.assign(w_.size(), 0.0f);
  }
  void start_epoch(int epoch) { t_.start_epoch(epoch); }
  void iterate() {
    Model& m = *t_.model;
    const float* g = test::gradient_at(t_, w_, true);
    for (size_t i = 0; i < w_.size(); ++i) {
      v_[i] = test::kMomentum * v_[i] + g[i] + test::kWeightDecay * w_[i];
      w_[i] -= test::kLr * v_[i];
    }
    if (++steps_ % period_ != 0) return;
    const std::vector<double> w = mean_over_ranks(comm_, w_);
    const std::vector<double> stats = mean_over_ranks(comm_, host(m.buffers()));
    for (size_t i = 0; i < w_.size(); ++i) w_[i] = static_cast<float>(w[i]);
    for (size_t i = 0; i < stats.size(); ++i)
      m.buffers().data<float>()[i] = static_cast<float>(stats[i]);
  }
  const std::vector<float>& weights() const { return w_; }
  std::vector<float> statistics() const { return host(t_.model->buffers()); }

 private:
  Comm& comm_;
  Trainee t_;
  int period_, steps_ = 0;
  std::vector<float> w_, v_;
};

TEST_CASE("local_sgd equals Local SGD written out by hand (momentum stays local)") {
  auto world = make_mpi_comm();
  Trainee local(*world, local_sgd(3));
  LocalSgdReference ref(*world, 3);
  for (int epoch = 0; epoch < 2; ++epoch) {
    local.start_epoch(epoch);
    ref.start_epoch(epoch);
    for (int i = 0; i < 20; ++i) {  // 480 samples / batch 24; period 3 spans the epochs
      CAPTURE(epoch);
      CAPTURE(i);
      local.train(epoch, 1);
      ref.iterate();
      // Rounding: the fused update, and the average as anchor + mean change.
      REQUIRE(max_difference(local.weights(), ref.weights().data(), local.size()) < 2e-5);
    }
  }
  const std::vector<float> stats = host(local.model->buffers());
  const std::vector<float> expected = ref.statistics();
  CHECK(max_difference(stats.data(), expected.data(), static_cast<int64_t>(stats.size())) < 1e-5);
}

TEST_CASE("local_sgd with sync_period 1 equals sync with plain SGD, to rounding") {
  auto world = make_mpi_comm();
  Trainee local(*world, local_sgd(1, true));
  TraineeOptions so = local_sgd(1, true);
  so.algorithm = "sync";
  so.keys = "";
  Trainee sync(*world, so);
  local.start_epoch(0);
  sync.start_epoch(0);
  for (int i = 0; i < 12; ++i) {
    CAPTURE(i);
    local.train(0, 1);
    sync.train(0, 1);
    // Averaging models (anchor + mean of the deltas) and averaging gradients differ only in
    // the rounding of the deltas: a few ulps of the weights per step.
    REQUIRE(max_difference(local.weights(), sync.weights(), local.size()) < 1e-5);
    CHECK(identical_on_all_ranks(*world, host(local.model->parameters())));
  }
  // The BatchNorm statistics are averaged as well; sync's are each rank's own.
  CHECK(identical_on_all_ranks(*world, host(local.model->buffers())));
}

TEST_CASE("after each averaging the ranks hold the same model: the average of theirs before") {
  auto world = make_mpi_comm();
  const int period = 3;
  Trainee averaged(*world, local_sgd(period));
  Trainee alone(*world, local_sgd(1000));  // the same local steps, never averaged in the window
  averaged.start_epoch(0);
  alone.start_epoch(0);
  for (int i = 1; i <= 3 * period; ++i) {
    CAPTURE(i);
    averaged.train(0, 1);
    alone.train(0, 1);
    const std::vector<float> w = host(averaged.model->parameters());
    const std::vector<float> stats = host(averaged.model->buffers());
    if (i % period != 0) {
      // Between averagings every rank steps on its own batches: the models differ.
      CHECK_FALSE(identical_on_all_ranks(*world, w));
      continue;
    }
    REQUIRE(identical_on_all_ranks(*world, w));
    REQUIRE(identical_on_all_ranks(*world, stats));
    // `alone` is where each rank would be without this averaging (from the same start).
    const std::vector<double> mean = mean_over_ranks(*world, host(alone.model->parameters()));
    const std::vector<double> mean_stats = mean_over_ranks(*world, host(alone.model->buffers()));
    CHECK(max_difference(w, mean) < 1e-6);
    CHECK(max_difference(stats, mean_stats) < 1e-6);
    // From here on both start from the averaged model again.
    std::memcpy(alone.model->parameters().raw(), w.data(), w.size() * 4);
    std::memcpy(alone.model->buffers().raw(), stats.data(), stats.size() * 4);
  }
}

TEST_CASE("local_sgd evaluates the averaged model and trains on from its own") {
  auto world = make_mpi_comm();
  Trainee evaluated(*world, local_sgd(3)), plain(*world, local_sgd(3));
  evaluated.start_epoch(0);
  plain.start_epoch(0);
  evaluated.train(0, 2);
  plain.train(0, 2);
  const std::vector<float> own = host(evaluated.model->parameters());
  const EvalResult on_average = evaluated.sched->evaluate(*evaluated.run->test_loader);
  CHECK(std::memcmp(own.data(), evaluated.weights(), own.size() * 4) == 0);  // restored
  evaluated.train(0, 4);
  plain.train(0, 4);
  CHECK(std::memcmp(plain.weights(), evaluated.weights(), own.size() * 4) == 0);

  // flush() averages for real (the end of training): the same model evaluate() looked at.
  Trainee flushed(*world, local_sgd(3));
  flushed.start_epoch(0);
  flushed.train(0, 2);
  flushed.sched->flush();
  CHECK(identical_on_all_ranks(*world, host(flushed.model->parameters())));
  const EvalResult after_flush = flushed.sched->evaluate(*flushed.run->test_loader);
  CHECK(after_flush.loss == on_average.loss);
  CHECK(after_flush.acc == on_average.acc);
}
