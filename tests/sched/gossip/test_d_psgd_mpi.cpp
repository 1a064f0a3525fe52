// D-PSGD on p ranks against a hand-written reference: one step is x_i ← Σ_j W_ij x_j − γ g_i(x_i)
// exactly (g_i the gradient the rank computed at its own model before mixing); with lr 0 the
// models are W^k x_0 after k steps, the mean is conserved and the spread shrinks by W's second
// eigenvalue; evaluation uses the mean model and leaves each rank's own.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "../trainee.h"
#include "comm/mpi_comm.h"
#include "sched/gossip/topology.h"

using namespace dtrain;
using test::make_distinct;
using test::Trainee;
using test::TraineeOptions;

namespace {

TraineeOptions d_psgd(const std::string& topology, float lr) {
  TraineeOptions o;
  o.algorithm = "d_psgd";
  o.keys = "topology: " + topology;
  o.lr = lr;
  o.momentum = 0;
  o.weight_decay = 0;
  return o;
}

// Every rank's vector, in rank order (an all-reduce of rank-placed slots).
std::vector<std::vector<double>> all_ranks(Comm& comm, const std::vector<float>& mine) {
  const size_t n = mine.size();
  std::vector<double> slots(n * comm.size(), 0.0);
  for (size_t e = 0; e < n; ++e) slots[comm.rank() * n + e] = mine[e];
  comm.allreduce_sum(slots);
  std::vector<std::vector<double>> out(comm.size());
  for (int r = 0; r < comm.size(); ++r)
    out[r].assign(slots.begin() + r * n, slots.begin() + (r + 1) * n);
  return out;
}

// models ← W · models, in double.
std::vector<std::vector<double>> mix(const std::vector<std::vector<double>>& w,
                                     const std::vector<std::vector<double>>& models) {
  std::vector<std::vector<double>> out(models.size(), std::vector<double>(models[0].size(), 0.0));
  for (size_t i = 0; i < models.size(); ++i)
    for (size_t j = 0; j < models.size(); ++j)
      for (size_t e = 0; e < models[0].size(); ++e) out[i][e] += w[i][j] * models[j][e];
  return out;
}

// Gives each rank a different model: the rank's own values, deterministic.
std::vector<float> own(const Trainee& t) {
  return t.host_weights();
}

double max_difference(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t e = 0; e < a.size(); ++e) worst = std::max(worst, std::abs(a[e] - b[e]));
  return worst;
}

double spread(const std::vector<std::vector<double>>& models) {
  double worst = 0;
  for (size_t e = 0; e < models[0].size(); ++e) {
    double mean = 0;
    for (const auto& m : models) mean += m[e] / models.size();
    for (const auto& m : models) worst = std::max(worst, std::abs(m[e] - mean));
  }
  return worst;
}

}  // namespace

TEST_CASE("d_psgd with lr 0: the models are W^k x0, their mean is kept, their spread shrinks") {
  auto comm = make_mpi_comm();
  const int p = comm->size();
  for (const std::string topology : {"ring", "exponential", "complete"}) {
    CAPTURE(topology);
    // optimizer.lr must be > 0: 1e-30 times a gradient vanishes against weights of order 0.1–1.
    Trainee t(*comm, d_psgd(topology, 1e-30f));
    make_distinct(t, comm->rank());
    auto reference = all_ranks(*comm, own(t));
    const double initial_spread = spread(reference);
    const auto w = mixing_matrix(topology_named(topology), p);
    t.start_epoch(0);
    for (int k = 1; k <= 3; ++k) {
      t.train(0, 1);
      reference = mix(w, reference);
      const auto models = all_ranks(*comm, own(t));
      CHECK(max_difference(own(t), reference[comm->rank()]) < 1e-5);
      // The mean is conserved (W is doubly stochastic).
      for (size_t e = 0; e < models[0].size(); e += 7) {
        double now = 0, then = 0;
        for (int r = 0; r < p; ++r) now += models[r][e], then += reference[r][e];
        CHECK(now == doctest::Approx(then).epsilon(1e-5));
      }
      // Ring on 4 ranks: |λ2| = 1/3; on 2: 0 (one step reaches the mean).
      if (topology == "ring" && p == 4)
        CHECK(spread(models) <= initial_spread * std::pow(1.0 / 3, k) + 1e-5);
      if (topology == "complete" || p == 2) CHECK(spread(models) < 1e-5);
    }
  }
}

TEST_CASE("d_psgd step: the neighbours' weighted mean minus lr times the own gradient") {
  auto comm = make_mpi_comm();
  const float lr = 0.05f;
  for (const std::string topology : {"ring", "complete"}) {
    CAPTURE(topology);
    Trainee t(*comm, d_psgd(topology, lr));
    make_distinct(t, comm->rank());
    const auto before = all_ranks(*comm, own(t));
    t.start_epoch(0);
    t.train(0, 1);
    const std::vector<double> mixed =
        mix(mixing_matrix(topology_named(topology), comm->size()), before)[comm->rank()];
    // The gradient the step used is still in the model's buffer (computed before mixing).
    const float* g = t.model->gradients().data<float>();
    std::vector<double> expected(mixed.size());
    for (size_t e = 0; e < mixed.size(); ++e) expected[e] = mixed[e] - lr * g[e];
    CHECK(max_difference(own(t), expected) < 1e-5);
    // The gradient is this rank's own: it differs from its neighbour's.
    const auto gradients = all_ranks(*comm, std::vector<float>(g, g + t.size()));
    CHECK(max_difference(std::vector<float>(g, g + t.size()),
                         gradients[(comm->rank() + 1) % comm->size()]) > 1e-4);
  }
}

TEST_CASE("d_psgd evaluates the mean model and trains on from its own") {
  auto comm = make_mpi_comm();
  Trainee t(*comm, d_psgd("ring", 0.05f));
  make_distinct(t, comm->rank());
  const std::vector<float> mine = own(t);
  const EvalResult e = t.sched->evaluate(*t.run->test_loader);
  CHECK(own(t) == mine);  // restored exactly
  // The mean model, evaluated by hand on every rank's shard, gives the same loss.
  const auto models = all_ranks(*comm, mine);
  float* w = t.model->parameters().data<float>();
  for (int64_t i = 0; i < t.size(); ++i) {
    double mean = 0;
    for (const auto& m : models) mean += m[i] / models.size();
    w[i] = static_cast<float>(mean);
  }
  Trainee check(*comm, d_psgd("ring", 0.05f));
  std::copy(w, w + t.size(), check.model->parameters().data<float>());
  std::copy(mine.begin(), mine.end(), w);
  const EvalResult reference = check.sched->evaluate(*check.run->test_loader);
  CHECK(e.loss == doctest::Approx(reference.loss).epsilon(1e-4));
  CHECK(e.acc == doctest::Approx(reference.acc));
}

TEST_CASE("d_psgd with the same batches on every rank is single-rank SGD") {
  auto comm = make_mpi_comm();
  auto alone = make_local_comm();
  TraineeOptions o = d_psgd("ring", 0.05f);
  o.momentum = 0.9f;  // momentum stays local: identical on identical ranks
  Trainee many(*comm, o), one(*alone, o);
  // Every rank loads the whole local batch from the whole set in the same order.
  LoaderOptions same = many.run->train_loading;
  same.global_batch /= comm->size();  // the local batch
  same.rank = 0, same.world = 1;
  Loader loader_many(*many.run->train_set, same), loader_one(*one.run->train_set, same);
  loader_many.start_epoch(0);
  loader_one.start_epoch(0);
  many.sched->run_epoch(loader_many, 0, 6);
  one.sched->run_epoch(loader_one, 0, 6);
  const std::vector<float> a = own(many), b = own(one);
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t e = 0; e < a.size(); ++e) worst = std::max(worst, double(std::abs(a[e] - b[e])));
  CHECK(worst < 1e-5);  // (x + x + x) / 3 rounds, nothing else differs
}
