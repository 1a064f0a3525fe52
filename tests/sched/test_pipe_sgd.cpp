// Pipe-SGD on one rank against a hand-written reference of SGD with a delayed gradient
// (Algorithm 1), K = 1 against sync, and the warm-up switch.
#include <doctest/doctest.h>

#include <cstring>
#include <deque>
#include <vector>

#include "trainee.h"

using namespace dtrain;
using test::Trainee;
using test::TraineeOptions;

namespace {

// Momentum SGD with weight decay written out on host vectors, applying each iteration's
// gradient K − 1 iterations late when pipelined, at once otherwise, and what is left at flush.
class DelayedSgdReference {
 public:
  DelayedSgdReference(Comm& comm, int K) : t_(comm, {}), K_(K) {
    w_.assign(t_.weights(), t_.weights() + t_.size());
    v_.assign(w_.size(), 0.0f);
  }
  void start_epoch(int epoch) { t_.start_epoch(epoch); }
  void iterate(bool pipelined) {
    if (pipelined && static_cast<int>(pending_.size()) == K_) apply_oldest();
    Batch batch;
    REQUIRE(t_.loader->next(batch));
    Model& m = *t_.model;
    std::memcpy(m.parameters().raw(), w_.data(), m.parameters().bytes());
    m.forward(batch.images, batch.labels);
    m.backward(1.0f / static_cast<float>(batch.labels.numel()));
    const float* g = m.gradients().data<float>();
    pending_.emplace_back(g, g + w_.size());
    if (!pipelined) apply_oldest();
  }
  void flush() {
    while (!pending_.empty()) apply_oldest();
  }
  const float* weights() const { return w_.data(); }

 private:
  void apply_oldest() {
    const std::vector<float>& g = pending_.front();
    for (size_t i = 0; i < w_.size(); ++i) {
      v_[i] = test::kMomentum * v_[i] + g[i] + test::kWeightDecay * w_[i];
      w_[i] -= test::kLr * v_[i];
    }
    pending_.pop_front();
  }

  Trainee t_;
  int K_;
  std::vector<float> w_, v_;
  std::deque<std::vector<float>> pending_;
};

TraineeOptions pipe_sgd(int K, int warmup_epochs = 0) {
  TraineeOptions o;
  o.algorithm = "pipe_sgd";
  o.keys = fmt::format("K: {}, warmup_epochs: {}", K, warmup_epochs);
  return o;
}

constexpr double kTolerance = 2e-5;  // float rounding of the fused update vs the loop above

}  // namespace

TEST_CASE("pipe_sgd with K >= 2 equals SGD with the gradient delayed by K - 1 iterations") {
  auto comm = make_local_comm();
  for (int K : {2, 3}) {
    CAPTURE(K);
    Trainee pipe(*comm, pipe_sgd(K));
    DelayedSgdReference ref(*comm, K);
    const std::vector<float> initial(pipe.weights(), pipe.weights() + pipe.size());
    for (int epoch = 0; epoch < 2; ++epoch) {
      pipe.start_epoch(epoch);
      ref.start_epoch(epoch);
      for (int i = 0; i < 20; ++i) {  // 480 samples / batch 24
        CAPTURE(epoch);
        CAPTURE(i);
        CHECK(pipe.train(epoch, 1).iterations == 1);
        ref.iterate(true);
        REQUIRE(test::max_difference(pipe.weights(), ref.weights(), pipe.size()) < kTolerance);
        // The first K aggregated gradients are zero: no update before iteration K + 1.
        if (epoch == 0 && i < K)
          CHECK(std::memcmp(pipe.weights(), initial.data(), initial.size() * 4) == 0);
      }
    }
    pipe.sched->flush();
    ref.flush();
    CHECK(test::max_difference(pipe.weights(), ref.weights(), pipe.size()) < kTolerance);
  }
}

TEST_CASE("pipe_sgd with K = 1 is D-Sync: the same weights as sync, bit for bit") {
  auto comm = make_local_comm();
  Trainee pipe(*comm, pipe_sgd(1)), sync(*comm, {});
  for (int epoch = 0; epoch < 2; ++epoch) {
    pipe.start_epoch(epoch);
    sync.start_epoch(epoch);
    for (int i = 0; i < 20; ++i) {
      pipe.train(epoch, 1);
      sync.train(epoch, 1);
      REQUIRE(std::memcmp(pipe.weights(), sync.weights(), pipe.size() * 4) == 0);
    }
  }
  pipe.sched->flush();  // nothing in flight: no change
  CHECK(std::memcmp(pipe.weights(), sync.weights(), pipe.size() * 4) == 0);
}

TEST_CASE(
    "warm-up runs D-Sync for exactly warmup_epochs, then pipelines without losing a gradient") {
  auto comm = make_local_comm();
  Trainee pipe(*comm, pipe_sgd(2, 2)), sync(*comm, {});
  DelayedSgdReference ref(*comm, 2);
  for (int epoch = 0; epoch < 2; ++epoch) {
    pipe.start_epoch(epoch);
    sync.start_epoch(epoch);
    ref.start_epoch(epoch);
    pipe.train(epoch, 0);
    sync.train(epoch, 0);
    for (int i = 0; i < 20; ++i) ref.iterate(false);
    CHECK(std::memcmp(pipe.weights(), sync.weights(), pipe.size() * 4) == 0);
  }
  // Epoch 3 pipelines: its first iteration has nothing to apply (the last warm-up gradient was
  // applied at once) and so waits for nothing; from its second iteration on, updates are late.
  const std::vector<float> after_warmup(pipe.weights(), pipe.weights() + pipe.size());
  pipe.start_epoch(2);
  ref.start_epoch(2);
  const EpochStats first = pipe.train(2, 1);
  CHECK(first.phases[Phase::wait] == 0);
  CHECK(std::memcmp(pipe.weights(), after_warmup.data(), after_warmup.size() * 4) == 0);
  ref.iterate(true);
  for (int i = 1; i < 20; ++i) {
    CAPTURE(i);
    pipe.train(2, 1);
    ref.iterate(true);
    REQUIRE(test::max_difference(pipe.weights(), ref.weights(), pipe.size()) < kTolerance);
  }
  pipe.sched->flush();
  ref.flush();  // every gradient applied exactly once
  CHECK(test::max_difference(pipe.weights(), ref.weights(), pipe.size()) < kTolerance);
}

TEST_CASE("pipe_sgd accounts for its time and learns") {
  auto comm = make_local_comm();
  Trainee pipe(*comm, pipe_sgd(2));
  pipe.start_epoch(0);
  const EpochStats first = pipe.train(0, 0);
  EpochStats last;
  for (int e = 1; e < 6; ++e) {
    pipe.start_epoch(e);
    last = pipe.train(e, 0);
  }
  CHECK(first.iterations == 20);
  CHECK(last.loss_sum / last.samples < 0.7 * first.loss_sum / first.samples);
  CHECK(last.phases.total() <= last.wall_s);
}
