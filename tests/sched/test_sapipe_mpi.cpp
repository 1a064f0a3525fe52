// SAPipe on 2 and 4 ranks: its limits are sync (k = 0) and Pipe-SGD with K = 2 (k = all); each
// compensation equals a hand-written loop of the paper's algorithm boxes; Δ is x_{t−1} − x_{t−2};
// on one rank wp1 is sync; it sends what Pipe-SGD sends.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_comm.h"
#include "comm/paced_comm.h"
#include "delaying_comm.h"
#include "sched/sapipe_scheduler.h"
#include "trainee.h"

using namespace dtrain;
using test::Trainee;
using test::TraineeOptions;

namespace {

// An MLP of two parameterised layers, fc1 (592 floats) then fc2 (51): k ∈ {0, 1, 2}.
TraineeOptions sapipe(const std::string& stale_layers, const std::string& compensation,
                      const char* compression = "none", double lambda = 0.2,
                      const char* form = "outer") {
  TraineeOptions o;
  o.algorithm = "sapipe";
  o.compression = compression;
  o.keys = fmt::format("stale_layers: {}, compensation: {}, dc_lambda: {}, dc_form: {}",
                       stale_layers, compensation, lambda, form);
  return o;
}

SapipeScheduler& scheduler_of(Trainee& t) {
  return dynamic_cast<SapipeScheduler&>(*t.sched);
}

void train_and_flush(Trainee& t, int iterations) {
  t.start_epoch(0);
  t.train(0, iterations);
  t.sched->flush();
}

bool same_weights(const Trainee& a, const Trainee& b) {
  return std::memcmp(a.weights(), b.weights(), a.size() * 4) == 0;
}

// The paper's Algorithms 1–3 with plain SGD, written out over host vectors: the first `e` floats
// are the stale prefix; gradients come from the rank's own batches (test::gradient_at), summed
// over the ranks with MPI. Returns the weights after `iterations` and the flush.
std::vector<float> reference(Comm& world, TraineeOptions o, int64_t e, const std::string& comp,
                             float lambda, const std::string& form, int iterations) {
  Trainee t(world, o);
  t.start_epoch(0);
  const int n = world.size();
  const float lr = o.lr;
  const int64_t size = t.size();
  std::vector<float> x = test::host(t.model->parameters());  // the master weights
  std::vector<std::vector<float>> sum(iterations), own(iterations);
  std::vector<float> previous(e), delta(e);
  bool has_previous = false, has_delta = false;
  auto compensate = [&](std::vector<float>& g) {  // DC(g, Δ) on the prefix
    if (form == "diag") {
      for (int64_t i = 0; i < e; ++i) g[i] += lambda * g[i] * g[i] * delta[i];
    } else {
      double dot = 0;
      for (int64_t i = 0; i < e; ++i) dot += static_cast<double>(g[i]) * delta[i];
      const float c = lambda * static_cast<float>(dot);
      for (int64_t i = 0; i < e; ++i) g[i] += c * g[i];  // g + λ(gᵀΔ)g
    }
  };
  auto stale_step = [&](int s) {
    std::vector<float> g(sum[s].begin(), sum[s].begin() + e);
    if (comp == "dc" && has_previous) {  // Algorithm 2: Δ = x_{t−1} − x_{t−2}
      for (int64_t i = 0; i < e; ++i) delta[i] = x[i] - previous[i];
      has_delta = true;
      compensate(g);
    }
    if (comp == "dc" || comp == "wp3") {
      previous.assign(x.begin(), x.begin() + e);
      has_previous = true;
    }
    for (int64_t i = 0; i < e; ++i) x[i] -= lr * g[i];
    if (comp == "wp3") {  // Algorithm 3: Δ of the step just taken
      for (int64_t i = 0; i < e; ++i) delta[i] = x[i] - previous[i];
      has_delta = true;
    }
  };
  auto fresh_step = [&](int s) {
    for (int64_t i = e; i < size; ++i) x[i] -= lr * sum[s][i];
  };
  const bool predicting = comp == "wp1" || comp == "wp2" || comp == "wp3";
  for (int t_ = 0; t_ < iterations; ++t_) {
    const bool stepped = t_ >= 2;
    if (stepped) stale_step(t_ - 2);
    if (t_ >= 1) fresh_step(t_ - 1);
    std::vector<float> w = x;
    if (predicting && t_ >= 1) {
      std::vector<float> ghat(e);
      const std::string option = stepped ? comp : "wp1";
      for (int64_t i = 0; i < e; ++i) {
        if (option == "wp1") ghat[i] = own[t_ - 1][i] * static_cast<float>(n);
        if (option == "wp2") ghat[i] = sum[t_ - 2][i];
        if (option == "wp3") ghat[i] = sum[t_ - 2][i] - own[t_ - 2][i];
      }
      if (option == "wp3") {
        if (has_delta) compensate(ghat);
        for (int64_t i = 0; i < e; ++i) ghat[i] += own[t_ - 1][i];
      }
      for (int64_t i = 0; i < e; ++i) w[i] = x[i] - lr * ghat[i];
    }
    const float* g = test::gradient_at(t, w, true);
    own[t_].resize(size);
    for (int64_t i = 0; i < size; ++i) own[t_][i] = g[i] / static_cast<float>(n);
    sum[t_] = own[t_];
    world.allreduce_sum(Tensor::borrow(sum[t_].data(), Shape{size}));
  }
  stale_step(iterations - 2);
  fresh_step(iterations - 1);
  stale_step(iterations - 1);
  return x;
}

TraineeOptions plain(TraineeOptions o) {
  o.momentum = 0;
  o.weight_decay = 0;
  return o;
}

}  // namespace

TEST_CASE("sapipe with k = 0 equals sync bit for bit, whatever the compensation") {
  auto world = make_mpi_comm();
  TraineeOptions so;
  Trainee sync(*world, so);
  train_and_flush(sync, 12);
  for (const char* comp : {"none", "dc", "wp1", "wp2", "wp3"}) {
    CAPTURE(comp);
    Trainee s(*world, sapipe("0", comp));
    CHECK(scheduler_of(s).stale_layers() == 0);
    train_and_flush(s, 12);
    CHECK(same_weights(s, sync));
  }
}

TEST_CASE("sapipe with all layers stale and no compensation equals pipe_sgd with K = 2") {
  auto world = make_mpi_comm();
  for (const char* compression : {"none", "quantize8"}) {
    CAPTURE(compression);
    TraineeOptions po;
    po.algorithm = "pipe_sgd";
    po.compression = compression;
    po.keys = "K: 2";
    Trainee pipe(*world, po), s(*world, sapipe("all", "none", compression));
    CHECK(scheduler_of(s).stale_layers() == 2);
    train_and_flush(pipe, 12);
    train_and_flush(s, 12);
    CHECK(same_weights(s, pipe));
  }
}

TEST_CASE("sapipe: delay compensation with λ = 0 is no compensation") {
  auto world = make_mpi_comm();
  for (const char* k : {"1", "all"})
    for (const char* form : {"outer", "diag"}) {
      CAPTURE(k);
      CAPTURE(form);
      Trainee none(*world, sapipe(k, "none")), dc(*world, sapipe(k, "dc", "none", 0.0, form));
      train_and_flush(none, 10);
      train_and_flush(dc, 10);
      CHECK(same_weights(none, dc));
    }
}

TEST_CASE("sapipe: every compensation equals the paper's algorithm written out by hand") {
  auto world = make_mpi_comm();
  constexpr int kIterations = 8;
  struct Case {
    const char* k;
    int64_t prefix;  // floats of the stale prefix
    const char* comp;
    const char* form;
  };
  const Case cases[] = {
      {"1", 592, "none", "outer"}, {"1", 592, "dc", "outer"},  {"1", 592, "dc", "diag"},
      {"all", 643, "dc", "outer"}, {"1", 592, "wp1", "outer"}, {"all", 643, "wp2", "outer"},
      {"1", 592, "wp2", "outer"},  {"1", 592, "wp3", "outer"}, {"all", 643, "wp3", "diag"}};
  std::vector<std::vector<float>> results;
  for (const Case& c : cases) {
    CAPTURE(c.k);
    CAPTURE(c.comp);
    CAPTURE(c.form);
    // λ = 5 makes the compensation big enough to matter in 8 iterations of a small model.
    const TraineeOptions o = plain(sapipe(c.k, c.comp, "none", 5.0, c.form));
    Trainee s(*world, o);
    REQUIRE(scheduler_of(s).stale_layers() == (c.prefix == 643 ? 2 : 1));
    train_and_flush(s, kIterations);
    const std::vector<float> expected =
        reference(*world, o, c.prefix, c.comp, 5.0f, c.form, kIterations);
    std::vector<float> got(s.weights(), s.weights() + s.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(got[i] - expected[i])));
      scale = std::max(scale, static_cast<double>(std::abs(expected[i])));
    }
    CHECK(worst <= 2e-5 * scale);
    // After the flush the model holds the master weights, the same on every rank.
    CHECK(test::identical_on_all_ranks(*world, got));
    results.push_back(got);
  }
  // The options do differ from each other (the test is not blind to them).
  for (size_t a = 0; a < results.size(); ++a)
    for (size_t b = a + 1; b < results.size(); ++b) {
      CAPTURE(a);
      CAPTURE(b);
      CHECK(test::max_difference(results[a].data(), results[b].data(),
                                 static_cast<int64_t>(results[a].size())) > 1e-6);
    }
}

TEST_CASE("sapipe: Δ is x_{t−1} − x_{t−2}, not the distance from the first weights") {
  // The public SAPipe code caches the first weights it saw, so its Δ grows with t.
  auto world = make_mpi_comm();
  Trainee s(*world, sapipe("1", "dc", "none", 0.5));
  s.start_epoch(0);
  std::vector<std::vector<float>> after;  // the weights after each iteration
  for (int t = 0; t < 9; ++t) {
    s.train(0, 1);
    after.emplace_back(s.weights(), s.weights() + s.size());
    if (t < 3) continue;  // the first stale step (t = 2) has no Δ yet
    CAPTURE(t);
    const std::vector<float> delta = scheduler_of(s).last_delta();
    REQUIRE(delta.size() == 592);
    // At t the prefix steps from x_{t−1} (after iteration t − 1) with Δ = x_{t−1} − x_{t−2}.
    int differing = 0;
    for (size_t i = 0; i < delta.size(); ++i)
      differing += delta[i] != after[t - 1][i] - after[t - 2][i];
    CHECK(differing == 0);
  }
  // After a flush (every evaluation) the next two gradients are computed at the flushed weights,
  // and the first of them is applied there: Δ = 0, not the flush's last step.
  s.sched->flush();
  s.train(0, 3);
  const std::vector<float> delta = scheduler_of(s).last_delta();
  REQUIRE(delta.size() == 592);
  for (float d : delta) REQUIRE(d == 0.0f);
  s.train(0, 1);  // and the next one from there
  bool moved = false;
  for (float d : scheduler_of(s).last_delta()) moved = moved || d != 0.0f;
  CHECK(moved);
}

TEST_CASE("sapipe with wp1 on one rank is sync, bit for bit (momentum and weight decay)") {
  auto local = make_local_comm();
  TraineeOptions so;
  Trainee sync(*local, so);
  train_and_flush(sync, 15);
  for (const char* k : {"1", "all"})
    for (const char* comp : {"wp1", "wp3"}) {
      CAPTURE(k);
      CAPTURE(comp);
      Trainee s(*local, sapipe(k, comp));
      train_and_flush(s, 15);
      CHECK(same_weights(s, sync));
    }
}

TEST_CASE("sapipe sends what pipe_sgd sends: one all-reduce of the trainable floats") {
  auto world = make_mpi_comm();
  for (const char* compression : {"none", "quantize8"}) {
    CAPTURE(compression);
    // k = all is one all-reduce per iteration, as pipe_sgd's one segment; k = 1 is two, as
    // pipe_sgd's two segments.
    for (const auto& [k, segments] : {std::pair{"all", 1}, std::pair{"1", 2}}) {
      CAPTURE(k);
      test::DelayingComm pipe_comm(*world, 0), sapipe_comm(*world, 0);
      TraineeOptions po;
      po.algorithm = "pipe_sgd";
      po.compression = compression;
      po.keys = fmt::format("K: 2, segments: {}", segments);
      Trainee pipe(pipe_comm, po), s(sapipe_comm, sapipe(k, "wp3", compression));
      train_and_flush(pipe, 10);
      train_and_flush(s, 10);
      // Summed over the ranks: where the two cuts fall moves a few bytes of the ring's blocks
      // between ranks, not their total.
      auto totals = [&](const test::Traffic& t) {
        std::vector<double> v{static_cast<double>(t.messages.load()),
                              static_cast<double>(t.message_bytes.load()),
                              static_cast<double>(t.allreduces.load()),
                              static_cast<double>(t.allreduce_bytes.load())};
        world->allreduce_sum(v);
        return v;
      };
      const std::vector<double> a = totals(pipe_comm.traffic()), b = totals(sapipe_comm.traffic());
      CHECK(b == a);
      if (std::string(compression) == "none")  // the trainable floats, once each per iteration
        CHECK(sapipe_comm.traffic().allreduce_bytes.load() == 10 * 643 * 4);
    }
  }
}

TEST_CASE("sapipe with stale_layers: auto profiles, then every rank uses rank 0's k") {
  auto world = make_mpi_comm();
  // An emulated slow link: the all-reduce takes longer than the whole backward.
  auto link = make_paced_comm(make_mpi_comm(), {1e6, 2e-3});
  for (Comm* comm : {world.get(), link.get()}) {
    Trainee s(*comm, sapipe("auto", "wp3"));
    CHECK(scheduler_of(s).stale_layers() == -1);
    s.start_epoch(0);
    s.train(0, 12);
    const int k = scheduler_of(s).stale_layers();
    CHECK(k >= 0);
    CHECK(k <= 2);
    std::vector<double> ks{static_cast<double>(k)};
    world->allreduce_sum(ks);
    CHECK(ks[0] == k * world->size());
    if (comm == link.get()) CHECK(k > 0);  // staleness hides the slow link
    s.train(0, 6);
    s.sched->flush();
    CHECK(test::identical_on_all_ranks(*world,
                                       std::vector<float>(s.weights(), s.weights() + s.size())));
  }
}

TEST_CASE("sapipe's warm-up epochs are D-Sync, then it pipelines without losing a gradient") {
  auto world = make_mpi_comm();
  TraineeOptions so;
  TraineeOptions o = sapipe("1", "wp3");
  o.keys += ", warmup_epochs: 1";
  Trainee sync(*world, so), s(*world, o);
  for (Trainee* t : {&sync, &s}) {
    t->start_epoch(0);
    t->train(0, 0);
    t->sched->flush();
  }
  CHECK(same_weights(s, sync));  // the whole first epoch
  s.start_epoch(1);
  s.train(1, 5);
  s.sched->flush();
  CHECK_FALSE(same_weights(s, sync));
  CHECK(test::identical_on_all_ranks(*world,
                                     std::vector<float>(s.weights(), s.weights() + s.size())));
}
