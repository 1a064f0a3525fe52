// HPSGD on 2 and 4 ranks: with sync_period 1 it is Pipe-SGD with K = 2 bit for bit (plain SGD,
// momentum, AdamW); with a fixed period it equals the algorithm written out by hand (with
// momentum, AdamW and a clip too: w's optimizer state takes each round's sum once, the replica
// steps from a copy of it); with `auto` and random
// communication delays every gradient computed on every rank reaches the global model exactly
// once, the global model is identical on every rank after every iteration, and every rank
// issues the same all-reduces.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "../delaying_comm.h"
#include "../trainee.h"
#include "comm/mpi_comm.h"
#include "sched/hpsgd/hpsgd_scheduler.h"

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

// HPSGD's optimizer path written out on host values: momentum SGD (weight decay in ĝ) or AdamW
// (torch.optim.AdamW, decay on tensors of two or more dimensions) for w, with a state of w's own
// that each merge of a round of k iterations steps k times with the round's mean gradient; the
// replica steps with a copy of that state taken at every r ← w. The local gradient is clipped by
// its own norm first.
class HpsgdOptimizerReference {
 public:
  HpsgdOptimizerReference(Comm& comm, const TraineeOptions& o, int period, double clip)
      : comm_(comm), t_(comm, o), o_(o), period_(period), clip_(clip) {
    w_ = host(t_.model->parameters());
    r_ = w_;
    a_.assign(w_.size(), 0.0);
    global_ = State(w_.size());
    replica_ = global_;
    decays_.assign(w_.size(), true);
    for (const WeightSlot& slot : t_.model->weight_slots())
      if (!slot.buffer && slot.shape.rank() < 2)
        for (int64_t e = 0; e < slot.shape.numel(); ++e)
          decays_[static_cast<size_t>(slot.offset + e)] = false;
  }
  void start_epoch(int epoch) { t_.start_epoch(epoch); }
  void iterate() {
    int64_t batch_rows = 0;
    const float* g = test::gradient_at(t_, r_, false, &batch_rows);
    std::vector<double> ghat(r_.size());
    double squares = 0;
    for (size_t i = 0; i < r_.size(); ++i) {
      ghat[i] = g[i] / static_cast<double>(batch_rows);
      squares += ghat[i] * ghat[i];
    }
    const double coefficient = std::min(1.0, clip_ > 0 ? clip_ / (std::sqrt(squares) + 1e-6) : 1.0);
    for (size_t i = 0; i < r_.size(); ++i) {
      ghat[i] *= coefficient;
      if (!adamw()) ghat[i] += o_.weight_decay * r_[i];  // SGD: decay is part of ĝ
      a_[i] += ghat[i];
    }
    ++accumulated_;
    if (++iterations_ % period_ == 0) {
      round();
    } else {
      step(replica_, r_, ghat);
    }
  }
  void flush() {
    merge();
    if (accumulated_ > 0) {
      round();
      merge();
    }
  }
  const std::vector<float>& global_model() const { return w_; }

 private:
  struct State {
    explicit State(size_t n = 0) : m(n, 0.0), v(n, 0.0) {}
    std::vector<double> m, v;  // SGD's momentum is m
    int64_t t = 0;
  };
  bool adamw() const { return o_.optimizer == "adamw"; }
  void round() {
    merge();
    b_ = a_;
    comm_.allreduce_sum(b_);
    sum_count_ = accumulated_;
    a_.assign(a_.size(), 0.0);
    accumulated_ = 0;
    r_ = w_;
    replica_ = global_;
  }
  void merge() {
    if (b_.empty()) return;
    // The round's k steps, each with its mean gradient.
    const double n = comm_.size() * static_cast<double>(sum_count_);
    std::vector<double> g(b_.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = b_[i] / n;
    for (int64_t k = 0; k < sum_count_; ++k) step(global_, w_, g);
    b_.clear();
  }
  void step(State& s, std::vector<float>& p, const std::vector<double>& g) const {
    const double lr = o_.lr;
    if (!adamw()) {
      for (size_t i = 0; i < p.size(); ++i) {
        s.m[i] = o_.momentum * s.m[i] + g[i];
        p[i] = static_cast<float>(p[i] - lr * s.m[i]);
      }
      return;
    }
    const double beta1 = 0.9, beta2 = 0.999, eps = 1e-3;  // eps as the options set it
    ++s.t;
    const double c1 = 1 - std::pow(beta1, s.t), c2 = 1 - std::pow(beta2, s.t);
    for (size_t i = 0; i < p.size(); ++i) {
      double w = p[i];
      if (decays_[i]) w *= 1 - lr * o_.weight_decay;
      s.m[i] = beta1 * s.m[i] + (1 - beta1) * g[i];
      s.v[i] = beta2 * s.v[i] + (1 - beta2) * g[i] * g[i];
      w -= lr * (s.m[i] / c1) / (std::sqrt(s.v[i] / c2) + eps);
      p[i] = static_cast<float>(w);
    }
  }

  Comm& comm_;
  Trainee t_;
  TraineeOptions o_;
  int period_, iterations_ = 0;
  int64_t accumulated_ = 0, sum_count_ = 0;
  double clip_;
  std::vector<float> w_, r_;
  std::vector<double> a_, b_;
  std::vector<bool> decays_;
  State global_, replica_;
};

TraineeOptions with_momentum(TraineeOptions o) {
  o.momentum = test::kMomentum;
  return o;
}

TraineeOptions with_adamw(TraineeOptions o) {
  o.optimizer = "adamw";
  o.optimizer_keys = "eps: 1e-3";
  o.lr = 0.01f;
  o.weight_decay = 0.1f;
  return o;
}

TEST_CASE("hpsgd with momentum or AdamW and a fixed period equals HPSGD written out by hand") {
  auto world = make_mpi_comm();
  for (const char* optimizer : {"momentum", "adamw"}) {
    for (int period : {1, 3}) {
      for (double clip : {0.0, 0.5}) {
        CAPTURE(optimizer);
        CAPTURE(period);
        CAPTURE(clip);
        TraineeOptions o = hpsgd(std::to_string(period));
        o = std::string(optimizer) == "adamw" ? with_adamw(o) : with_momentum(o);
        if (clip > 0)
          o.optimizer_keys += std::string(o.optimizer_keys.empty() ? "" : ", ") +
                              "clip_grad_norm: " + std::to_string(clip);
        test::DelayingComm comm(*world, 1.0);
        Trainee t(comm, o);
        HpsgdOptimizerReference reference(*world, o, period, clip);
        t.start_epoch(0);
        reference.start_epoch(0);
        for (int i = 0; i < 11; ++i) {  // a round left accumulated at the end when period 3
          t.train(0, 1);
          reference.iterate();
        }
        t.sched->flush();
        reference.flush();
        const std::vector<float>& expected = reference.global_model();
        std::vector<double> wide(expected.begin(), expected.end());
        CHECK(max_difference(host(t.model->parameters()), wide) < 2e-5);
        CHECK(identical_on_all_ranks(*world, host(t.model->parameters())));
      }
    }
  }
}

TEST_CASE("hpsgd with sync_period 1, momentum or AdamW, equals pipe_sgd with K = 2 bit for bit") {
  auto world = make_mpi_comm();
  for (const char* optimizer : {"momentum", "adamw"}) {
    CAPTURE(optimizer);
    auto configure = [&](TraineeOptions o) {
      o = std::string(optimizer) == "adamw" ? with_adamw(o) : with_momentum(o);
      // SGD's decay joins ĝ at the replica (HPSGD) or the step (Pipe-SGD): compared without.
      if (o.optimizer == "sgd") o.weight_decay = 0;
      return o;
    };
    TraineeOptions po;
    po.algorithm = "pipe_sgd";
    po.keys = "K: 2";
    Trainee pipe(*world, configure(po)), hp(*world, configure(hpsgd("1")));
    pipe.start_epoch(0);
    hp.start_epoch(0);
    pipe.train(0, 9);
    hp.train(0, 9);
    pipe.sched->flush();
    hp.sched->flush();
    CHECK(std::memcmp(pipe.weights(), hp.weights(), pipe.size() * 4) == 0);
  }
}

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
