// Causal attention throughput of the CPU backend (lib/backend/cpu/cpu_attention.cpp): forward
// and backward of one shape, best of timed repetitions, in GFLOP/s with the forward counted as
// its two causal matrix products (2·T²·D·heads·N) and the backward as 2.5× that.
//   dtrain_attention_bench --batch 8 --seq 256 --heads 6 --head-dim 64 [--dropout 0.1]
#include <CLI/CLI.hpp>  // command line
#include <algorithm>    // min
#include <chrono>
#include <cstdio>
#include <ctime>  // clock_gettime

#include "backend/backend.h"
#include "core/rng.h"

namespace {
using Clock = std::chrono::steady_clock;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Best seconds of one call of `body` over `repeats` timed calls (the machines are shared): wall
// time, and with one thread the process's CPU time, which other processes on the core do not
// stretch.
template <class Body>
double best_seconds(int repeats, bool cpu_time, const Body& body) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    body();
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::min(best, cpu_time ? process_cpu_seconds() - cpu_start : wall);
  }
  return best;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Causal attention throughput of the CPU backend"};
  int64_t batch = 8, seq = 256, heads = 6, head_dim = 64;
  float dropout = 0.0f;
  int threads = 1, repeats = 20;
  app.add_option("--batch", batch, "sequences");
  app.add_option("--seq", seq, "positions per sequence");
  app.add_option("--heads", heads, "attention heads");
  app.add_option("--head-dim", head_dim, "channels per head");
  app.add_option("--dropout", dropout, "dropout of the attention weights");
  app.add_option("--threads", threads, "intra-op threads");
  app.add_option("--repeats", repeats, "timed calls of each pass (the best counts)");
  CLI11_PARSE(app, argc, argv);

  auto be = dtrain::make_backend({dtrain::DeviceChoice::cpu, threads, 0, false, false});
  be->set_num_threads(threads);
  const dtrain::AttentionSpec spec{batch, seq, heads, head_dim, dropout};
  auto op = be->make_attention(spec);
  const int64_t C = spec.channels();
  dtrain::Tensor qkv = be->empty({batch, seq, 3 * C}), dy = be->empty({batch, seq, C});
  for (int64_t i = 0; i < qkv.numel(); ++i)
    qkv.data<float>()[i] = dtrain::random_normal(1, 1, static_cast<uint64_t>(i));
  for (int64_t i = 0; i < dy.numel(); ++i)
    dy.data<float>()[i] = dtrain::random_normal(1, 2, static_cast<uint64_t>(i));
  dtrain::Tensor y = be->empty({batch, seq, C}), lse = be->empty({batch, heads, seq});
  dtrain::Tensor dqkv = be->empty({batch, seq, 3 * C});
  dtrain::Tensor ws = be->empty({static_cast<int64_t>(op->workspace_bytes())}, dtrain::DType::u8);
  const bool training = dropout > 0.0f;
  const double fwd =
      best_seconds(repeats, threads == 1, [&] { op->forward(qkv, y, lse, ws, training, 1, 2); });
  const double bwd =
      best_seconds(repeats, threads == 1, [&] { op->backward(qkv, y, dy, lse, ws, 1, 2, dqkv); });
  const double flops = 2.0 * static_cast<double>(seq * seq * head_dim * heads * batch);
  std::printf(
      "N=%lld T=%lld H=%lld D=%lld dropout=%g threads=%d (%s time): forward %.3f ms %.1f GFLOP/s, "
      "backward %.3f ms %.1f GFLOP/s\n",
      static_cast<long long>(batch), static_cast<long long>(seq), static_cast<long long>(heads),
      static_cast<long long>(head_dim), dropout, threads, threads == 1 ? "cpu" : "wall", fwd * 1e3,
      flops / fwd * 1e-9, bwd * 1e3, 2.5 * flops / bwd * 1e-9);
  return 0;
}
