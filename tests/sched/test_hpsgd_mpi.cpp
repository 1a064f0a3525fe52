// HPSGD on 2 and 4 ranks: with sync_period 1 it is Pipe-SGD with K = 2 bit for bit; with a
// fixed period it equals the algorithm written out by hand; with `auto` and random
// communication delays every gradient computed on every rank reaches the global model exactly
// once, the global model is identical on every rank after every iteration, and every rank
// issues the same all-reduces.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "comm/mpi_comm.h"
#include "delaying_comm.h"
#include "sched/hpsgd_scheduler.h"
#include "trainee.h"

using namespace dtrain;
using test::host;
using test::identical_on_all_ranks;
using test::max_difference;
using test::Trainee;
using test::TraineeOptions;

namespace {

TraineeOptions hpsgd(const std::string& period, const char* compression = "none") {
  TraineeOptions o;
  o.algorithm = "hpsgd";
  o.compression = compression;
  o.keys = "sync_period: " + period;
  o.momentum = 0;  // plain SGD: the only optimizer HPSGD takes
  return o;
}

HpsgdScheduler& scheduler_of(Trainee& t) {
  return dynamic_cast<HpsgdScheduler&>(*t.sched);
}

// FNV-1a of a buffer's bytes: a fingerprint of w to compare across ranks afterwards, so that the
// ranks are not lined up by a collective every iteration.
uint64_t fingerprint(const Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  const auto* bytes = static_cast<const unsigned char*>(t.raw());
  for (size_t i = 0; i < t.bytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

}  // namespace

// Algorithms 2 and 3 written out on host vectors with a fixed period: the gradient ĝ of the
// replica r (weight decay included), accumulated in a; every `period` iterations w takes the
// previous round's sum b (w ← w − μ·b/n), a is all-reduced into the next b and r ← w; in
// between r ← r − μĝ. The Trainee only lends its loader and model for the gradients.
class HpsgdReference {
 public:
  HpsgdReference(Comm& comm, int period)
      : comm_(comm), t_(comm, hpsgd(std::to_string(period))), period_(period) {
    w_ = host(t_.model->parameters());
    r_ = w_;
    a_.assign(w_.size(), 0.0);
  }
  void start_epoch(int epoch) { t_.start_epoch(epoch); }
  void iterate() {
    int64_t batch_rows = 0;
    // The summed loss's gradient: ĝ = it / rows + λr.
    const float* g = test::gradient_at(t_, r_, false, &batch_rows);
    const double rows = static_cast<double>(batch_rows);
    std::vector<double> ghat(r_.size());
    for (size_t i = 0; i < r_.size(); ++i) ghat[i] = g[i] / rows + test::kWeightDecay * r_[i];
    for (size_t i = 0; i < r_.size(); ++i) a_[i] += ghat[i];
    ++accumulated_;
    if (++iterations_ % period_ == 0) {
      merge();
      b_ = a_;
      comm_.allreduce_sum(b_);
      a_.assign(a_.size(), 0.0);
      accumulated_ = 0;
      r_ = w_;
    } else {
      for (size_t i = 0; i < r_.size(); ++i) r_[i] -= static_cast<float>(test::kLr * ghat[i]);
    }
  }
  // Everything still in flight or accumulated reaches w.
  void flush() {
    merge();
    if (accumulated_ == 0) return;
    b_ = a_;
    comm_.allreduce_sum(b_);
    merge();
  }
  const std::vector<float>& global_model() const { return w_; }

 private:
  void merge() {
    if (b_.empty()) return;
    const double n = comm_.size();
    for (size_t i = 0; i < w_.size(); ++i) w_[i] -= static_cast<float>(test::kLr * b_[i] / n);
    b_.clear();
  }

  Comm& comm_;
  Trainee t_;
  int period_, iterations_ = 0, accumulated_ = 0;
  std::vector<float> w_, r_;
  std::vector<double> a_, b_;
};

TEST_CASE("hpsgd with sync_period 1, plain SGD and a constant lr equals pipe_sgd with K = 2") {
  auto world = make_mpi_comm();
  for (const char* compression : {"none", "quantize8"}) {
    for (int iterations : {1, 2, 7, 12}) {
      CAPTURE(compression);
      CAPTURE(iterations);
      TraineeOptions po;
      po.algorithm = "pipe_sgd";
      po.compression = compression;
      po.keys = "K: 2";
      po.momentum = 0, po.weight_decay = 0;
      TraineeOptions ho = hpsgd("1", compression);
      ho.weight_decay = 0;
      Trainee pipe(*world, po), hp(*world, ho);
      pipe.start_epoch(0);
      hp.start_epoch(0);
      pipe.train(0, iterations);
      hp.train(0, iterations);
      pipe.sched->flush();
      hp.sched->flush();
      CHECK(std::memcmp(pipe.weights(), hp.weights(), pipe.size() * 4) == 0);
    }
  }
}

TEST_CASE("hpsgd with a fixed period equals HPSGD written out by hand, however late rounds end") {
  auto world = make_mpi_comm();
  for (double delay_ms : {0.0, 3.0}) {
    for (int period : {2, 3}) {
      CAPTURE(delay_ms);
      CAPTURE(period);
      test::DelayingComm comm(*world, delay_ms);
      Trainee t(comm, hpsgd(std::to_string(period)));
      HpsgdReference reference(*world, period);
      t.start_epoch(0);
      reference.start_epoch(0);
      for (int i = 0; i < 11; ++i) {  // a round left accumulated at the end when period > 1
        t.train(0, 1);
        reference.iterate();
      }
      t.sched->flush();
      reference.flush();
      const std::vector<float>& expected = reference.global_model();
      std::vector<double> wide(expected.begin(), expected.end());
      CHECK(max_difference(host(t.model->parameters()), wide) < 2e-6);
      // The rounds: one per period, plus flush's for what was accumulated after the last.
      CHECK(scheduler_of(t).rounds() == 11 / period + (11 % period != 0 ? 1 : 0));
    }
  }
}

TEST_CASE(
    "hpsgd auto under random delays: every gradient reaches w once, w agrees on every rank after "
    "every iteration, the ranks issue the same all-reduces") {
  auto world = make_mpi_comm();
  // Uneven compute (~0.5 to 2 ms an iteration), so that the ranks drift apart and a round ends
  // at different iterations on different ranks.
  TraineeOptions o = hpsgd("auto");
  o.weight_decay = 0;  // the gradient buffer is then ĝ / ranks exactly (decay: the test above)
  o.stragglers = "[";
  for (int r = 0; r < world->size(); ++r)
    o.stragglers += fmt::format("{}{{rank: {}, slowdown: {}}}", r ? ", " : "", r, 10 + 7 * r);
  o.stragglers += "]";
  int64_t uneven = 0;
  for (double delay_ms : {0.0, 2.0, 8.0}) {
    CAPTURE(delay_ms);
    test::DelayingComm comm(*world, delay_ms, 3);
    std::vector<double> sum;  // of this rank's ĝ / ranks over the run: the gradient it leaves
    Trainee* trainee = nullptr;
    Trainee t(comm, o, [&](const IterationReport&) {
      const float* g = trainee->model->gradients().data<float>();
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += g[i];
    });
    trainee = &t;
    sum.assign(static_cast<size_t>(t.size()), 0.0);
    const std::vector<float> w0 = host(t.model->parameters());
    HpsgdScheduler& s = scheduler_of(t);
    std::vector<uint64_t> prints;  // w's fingerprint after every iteration
    for (int epoch = 0; epoch < 2; ++epoch) {
      t.start_epoch(epoch);
      while (t.train(epoch, 1).iterations == 1) prints.push_back(fingerprint(s.global_model()));
      if (epoch == 0) t.sched->flush();  // as an evaluation does; training goes on after it
    }
    const int64_t iterations = static_cast<int64_t>(prints.size());
    const std::string mine(reinterpret_cast<const char*>(prints.data()), prints.size() * 8);
    std::string root = mine;
    world->broadcast(root, 0);
    CHECK(root == mine);
    t.sched->flush();
    CHECK(identical_on_all_ranks(*world, host(t.model->parameters())));
    world->allreduce_sum(sum);
    std::vector<double> expected(w0.begin(), w0.end());
    for (size_t i = 0; i < expected.size(); ++i) expected[i] -= test::kLr * sum[i];
    CHECK(max_difference(host(t.model->parameters()), expected) < 2e-6);

    std::vector<double> rounds{static_cast<double>(s.rounds())};
    world->allreduce_sum(rounds);
    CHECK(rounds[0] == static_cast<double>(s.rounds() * world->size()));
    CHECK(s.rounds() >= 2);
    // With delays longer than an iteration, some rounds span several iterations: the replica
    // trained in between.
    if (delay_ms >= 8) CHECK(s.rounds() < iterations);
    uneven += s.uneven_agreements();
  }
  // The ranks compute at different speeds: they proposed different boundaries at some point,
  // and the largest proposal was taken (else the fingerprints above would differ).
  CHECK(uneven > 0);
}

TEST_CASE("hpsgd with a codec keeps w identical on every rank after every iteration") {
  auto world = make_mpi_comm();
  for (const char* period : {"auto", "2"}) {
    CAPTURE(period);
    test::DelayingComm comm(*world, 2.0, 5);
    Trainee t(comm, hpsgd(period, "quantize8"));
    t.start_epoch(0);
    for (int i = 0; i < 12; ++i) {
      t.train(0, 1);
      REQUIRE(identical_on_all_ranks(*world, host(scheduler_of(t).global_model())));
    }
    t.sched->flush();
    CHECK(identical_on_all_ranks(*world, host(t.model->parameters())));
  }
}

TEST_CASE("hpsgd on one rank is plain SGD") {
  auto local = make_local_comm();
  TraineeOptions so;
  so.momentum = 0;
  Trainee sync(*local, so), hp(*local, hpsgd("auto"));
  sync.start_epoch(0);
  hp.start_epoch(0);
  sync.train(0, 9);
  hp.train(0, 9);
  hp.sched->flush();
  CHECK(std::memcmp(sync.weights(), hp.weights(), sync.size() * 4) == 0);
}
