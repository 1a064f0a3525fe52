// SAPipe on 2 and 4 ranks: its limits are sync (k = 0) and Pipe-SGD with K = 2 (k = all); each
// compensation equals a hand-written loop of the paper's algorithm boxes, with SGD and with
// AdamW (prediction with AdamW's own step), the all-reduced gradient clipped or not; Δ is
// x_{t−1} − x_{t−2}; on one rank wp1 is sync; it sends what Pipe-SGD sends; AdamW learns.
#include <doctest/doctest.h>

#include <algorithm>  // min, max, copy
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../delaying_comm.h"
#include "../trainee.h"
#include "comm/mpi_comm.h"
#include "comm/paced_comm.h"
#include "sched/sapipe/sapipe_scheduler.h"

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

// What the reference does besides plain SGD: AdamW without weight decay (the step of gradient j
// is AdamW's step t = j + 1; a prediction is the next step's, from the moments as they are),
// and clipping of the all-reduced gradient to `clip` (0: off) — the prefix with the whole
// gradient's norm, the fresh layers with their own and the last stepped prefix's.
struct Extra {
  bool adamw = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double clip = 0;
};

// The paper's Algorithms 1–3 with plain SGD, written out over host vectors: the first `e` floats
// are the stale prefix; gradients come from the rank's own batches (test::gradient_at), summed
// over the ranks with MPI. Returns the weights after `iterations` and the flush.
std::vector<float> reference(Comm& world, TraineeOptions o, int64_t e, const std::string& comp,
                             float lambda, const std::string& form, int iterations,
                             const Extra& extra = {}) {
  Trainee t(world, o);
  t.start_epoch(0);
  const int n = world.size();
  const float lr = o.lr;
  const int64_t size = t.size();
  std::vector<float> x = test::host(t.model->parameters());  // the master weights
  std::vector<std::vector<float>> sum(iterations), own(iterations);
  std::vector<float> previous(e), delta(e);
  bool has_previous = false, has_delta = false;
  std::vector<double> m(size, 0.0), v(size, 0.0);  // AdamW's moments
  // The new value of weight i with gradient g in step t (1-based), the moments updated or not.
  auto update = [&](int64_t i, float w, float g, int64_t t, bool commit) {
    if (!extra.adamw) return w - lr * g;
    const double mi = extra.beta1 * m[i] + (1 - extra.beta1) * g;
    const double vi = extra.beta2 * v[i] + (1 - extra.beta2) * g * g;
    if (commit) m[i] = mi, v[i] = vi;
    const double b1 = 1 - std::pow(extra.beta1, t), b2 = 1 - std::pow(extra.beta2, t);
    return static_cast<float>(w - lr / b1 * mi / (std::sqrt(vi) / std::sqrt(b2) + extra.eps));
  };
  auto coefficient = [&](double squared) {
    return static_cast<float>(std::min(1.0, extra.clip / (std::sqrt(squared) + 1e-6)));
  };
  auto squared = [](const std::vector<float>& g, int64_t from, int64_t to) {
    double s = 0;
    for (int64_t i = from; i < to; ++i) s += static_cast<double>(g[i]) * g[i];
    return s;
  };
  std::vector<float> clipped_sum(size);           // the last stepped gradient, as clipped
  std::vector<double> fresh_squared(iterations);  // ‖fresh part of gradient j‖²
  double prefix_squared = 0;                      // of the last stepped prefix
  float last_c = 1;
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
    if (extra.clip > 0) {
      const double p = squared(sum[s], 0, e);
      last_c = coefficient(p + (e < size ? fresh_squared[s] : 0));
      prefix_squared = p;
      for (float& gi : g) gi *= last_c;
    }
    std::copy(g.begin(), g.end(), clipped_sum.begin());
    if (comp == "dc" && has_previous) {  // Algorithm 2: Δ = x_{t−1} − x_{t−2}
      for (int64_t i = 0; i < e; ++i) delta[i] = x[i] - previous[i];
      has_delta = true;
      compensate(g);
    }
    if (comp == "dc" || comp == "wp3") {
      previous.assign(x.begin(), x.begin() + e);
      has_previous = true;
    }
    for (int64_t i = 0; i < e; ++i) x[i] = update(i, x[i], g[i], s + 1, true);
    if (comp == "wp3") {  // Algorithm 3: Δ of the step just taken
      for (int64_t i = 0; i < e; ++i) delta[i] = x[i] - previous[i];
      has_delta = true;
    }
  };
  auto fresh_step = [&](int s) {
    float c = 1;
    if (extra.clip > 0) {
      fresh_squared[s] = squared(sum[s], e, size);
      c = coefficient(fresh_squared[s] + (e > 0 ? prefix_squared : 0));
    }
    for (int64_t i = e; i < size; ++i) x[i] = update(i, x[i], c * sum[s][i], s + 1, true);
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
      // Clipping: the own gradients scaled by the last stepped gradient's coefficient.
      const float c = stepped ? last_c : 1.0f;
      for (int64_t i = 0; i < e; ++i) {
        if (option == "wp1") ghat[i] = c * own[t_ - 1][i] * static_cast<float>(n);
        if (option == "wp2") ghat[i] = clipped_sum[i];
        if (option == "wp3") ghat[i] = clipped_sum[i] - c * own[t_ - 2][i];
      }
      if (option == "wp3") {
        if (has_delta) compensate(ghat);
        for (int64_t i = 0; i < e; ++i) ghat[i] += c * own[t_ - 1][i];
      }
      // The step of gradient t_ − 1, the next one: AdamW's t = t_.
      for (int64_t i = 0; i < e; ++i) w[i] = update(i, x[i], ghat[i], t_, false);
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

namespace {

// AdamW with the paper's GPT-2 betas (0.9, 0.98), no weight decay (the hand-written reference
// has none), the all-reduced gradient clipped to `clip` (0: off).
TraineeOptions with_adamw(TraineeOptions o, double clip = 0) {
  o = plain(o);
  o.optimizer = "adamw";
  o.lr = 0.01f;
  o.optimizer_keys = "betas: [0.9, 0.98]";
  if (clip > 0) o.optimizer_keys += fmt::format(", clip_grad_norm: {}", clip);
  return o;
}

// Plain SGD with the all-reduced gradient clipped to `clip`.
TraineeOptions clipped_sgd(TraineeOptions o, double clip) {
  o = plain(o);
  o.optimizer = "sgd";
  o.optimizer_keys = fmt::format("clip_grad_norm: {}", clip);
  return o;
}

}  // namespace

TEST_CASE("sapipe with AdamW: k = 0 is sync and k = all is pipe_sgd, bit for bit") {
  auto world = make_mpi_comm();
  for (double clip : {0.0, 0.05}) {
    CAPTURE(clip);
    TraineeOptions so = with_adamw(TraineeOptions{}, clip);
    Trainee sync(*world, so);
    train_and_flush(sync, 12);
    for (const char* comp : {"none", "dc", "wp1", "wp2", "wp3"}) {
      CAPTURE(comp);
      Trainee s(*world, with_adamw(sapipe("0", comp), clip));
      train_and_flush(s, 12);
      CHECK(same_weights(s, sync));
    }
  }
  TraineeOptions po = with_adamw(TraineeOptions{});
  po.algorithm = "pipe_sgd";
  po.keys = "K: 2";
  Trainee pipe(*world, po), s(*world, with_adamw(sapipe("all", "none")));
  train_and_flush(pipe, 12);
  train_and_flush(s, 12);
  CHECK(same_weights(s, pipe));
}

TEST_CASE("sapipe with AdamW and with clipping: every compensation equals the hand-written loop") {
  auto world = make_mpi_comm();
  constexpr int kIterations = 8;
  struct Case {
    const char* k;
    int64_t prefix;
    const char* comp;
    bool adamw;
    double clip;
  };
  // A clip of 0.05 bites on most steps of this model (its gradient norms are about 0.1–0.3).
  const Case cases[] = {{"1", 592, "none", true, 0},       {"1", 592, "dc", true, 0},
                        {"all", 643, "dc", true, 0},       {"1", 592, "wp1", true, 0},
                        {"all", 643, "wp2", true, 0},      {"1", 592, "wp3", true, 0},
                        {"all", 643, "wp3", true, 0},      {"1", 592, "none", false, 0.05},
                        {"all", 643, "none", false, 0.05}, {"1", 592, "wp1", false, 0.05},
                        {"1", 592, "wp2", false, 0.05},    {"1", 592, "wp3", false, 0.05},
                        {"all", 643, "dc", false, 0.05},   {"1", 592, "wp3", true, 0.05}};
  for (const Case& c : cases) {
    CAPTURE(c.k);
    CAPTURE(c.comp);
    CAPTURE(c.adamw);
    CAPTURE(c.clip);
    TraineeOptions o = sapipe(c.k, c.comp, "none", 5.0, "outer");
    o = c.adamw ? with_adamw(o, c.clip) : clipped_sgd(o, c.clip > 0 ? c.clip : 1e9);
    Trainee s(*world, o);
    train_and_flush(s, kIterations);
    Extra extra;
    extra.adamw = c.adamw;
    extra.beta2 = 0.98;
    extra.clip = c.clip;
    const std::vector<float> expected =
        reference(*world, o, c.prefix, c.comp, 5.0f, "outer", kIterations, extra);
    std::vector<float> got(s.weights(), s.weights() + s.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(got[i] - expected[i])));
      scale = std::max(scale, static_cast<double>(std::abs(expected[i])));
    }
    CHECK(worst <= 2e-5 * scale);
    CHECK(test::identical_on_all_ranks(*world, got));
    if (c.clip > 0) {  // the clip did bite: unclipped, the run differs
      Trainee unclipped(*world, c.adamw ? with_adamw(o) : clipped_sgd(o, 1e9));
      train_and_flush(unclipped, kIterations);
      CHECK(test::max_difference(got.data(), unclipped.weights(), s.size()) > 1e-4);
    }
  }
}

TEST_CASE("sapipe with AdamW learns on 2 ranks, every compensation") {
  auto world = make_mpi_comm();
  for (const char* comp : {"none", "dc", "wp1", "wp2", "wp3"}) {
    CAPTURE(comp);
    TraineeOptions o = with_adamw(sapipe("1", comp));
    o.optimizer_keys += ", clip_grad_norm: 1.0";
    Trainee s(*world, o);
    double first = 0, last = 0;
    for (int epoch = 0; epoch < 5; ++epoch) {
      s.start_epoch(epoch);
      const EpochStats stats = s.train(epoch, 0);
      const double loss = stats.loss_sum / static_cast<double>(stats.samples);
      if (epoch == 0) first = loss;
      last = loss;
    }
    CAPTURE(first);
    CAPTURE(last);
    CHECK(last < 0.8 * first);
  }
}

TEST_CASE("sapipe with AdamW: save, continue, load, continue again: identical parameters") {
  // The moments and the step count travel in the base state, the slots, Δ, the master prefix
  // and the clip's norms in sapipe's own: a gradient in flight, a prediction in the model.
  auto world = make_mpi_comm();
  for (const char* keys :
       {"stale_layers: 1, compensation: wp3", "stale_layers: all, compensation: dc",
        "stale_layers: 1, compensation: wp1"}) {
    CAPTURE(keys);
    TraineeOptions o;
    o.algorithm = "sapipe";
    o.keys = keys;
    o.optimizer = "adamw";
    o.lr = 0.01f;
    o.optimizer_keys = "betas: [0.9, 0.98], clip_grad_norm: 0.05";
    Trainee t(*world, o);
    t.start_epoch(0);
    t.train(0, 5);
    SchedulerState state;
    t.sched->save(state);
    t.train(0, 6);
    t.sched->flush();
    const std::vector<float> first(t.weights(), t.weights() + t.size());
    t.sched->load(state);
    t.start_epoch(0);
    Batch skipped;
    for (int i = 0; i < 5; ++i) REQUIRE(t.loader->next(skipped));
    t.train(0, 6);
    t.sched->flush();
    CHECK(std::memcmp(first.data(), t.weights(), first.size() * 4) == 0);
    CHECK(state.has("optimizer.m"));
    CHECK(state.has("optimizer.step"));
  }
}
