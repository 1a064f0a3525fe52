// Activation recomputation (model.recompute: blocks) on the GPT: the planned activation bytes per
// token with and without it, and the training step's time (forward, loss, backward) of each, in
// interleaved pairs (none, blocks, none, ...), best of the pairs; with one thread the process's CPU
// time, which other processes on a shared core do not stretch. docs/memory.md quotes its output.
//   dtrain_recompute_bench [--layers 6 --heads 6 --embd 384 --seq 256 --batch 8 --vocab 65]
//                          [--pairs 5] [--threads 1] [--dropout 0]
#include <CLI/CLI.hpp>  // command line
#include <algorithm>    // min
#include <chrono>
#include <cstdio>
#include <ctime>  // clock_gettime
#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/rng.h"
#include "nn/graph.h"
#include "nn/model.h"

namespace {
using namespace dtrain;
using Clock = std::chrono::steady_clock;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app("GPT training step with and without activation recomputation");
  int64_t layers = 6, heads = 6, embd = 384, seq = 256, batch = 8, vocab = 65;
  int pairs = 5, threads = 1;
  double dropout = 0;
  app.add_option("--layers", layers);
  app.add_option("--heads", heads);
  app.add_option("--embd", embd);
  app.add_option("--seq", seq);
  app.add_option("--batch", batch);
  app.add_option("--vocab", vocab);
  app.add_option("--pairs", pairs);
  app.add_option("--threads", threads);
  app.add_option("--dropout", dropout);
  CLI11_PARSE(app, argc, argv);

  auto backend = make_backend({DeviceChoice::cpu, threads});
  const ModelInput input{{seq}, vocab, batch};
  auto spec = [&](const char* recompute) {
    YAML::Node s(YAML::NodeType::Map);
    s["name"] = "gpt";
    s["n_layer"] = layers;
    s["n_head"] = heads;
    s["n_embd"] = embd;
    s["dropout"] = dropout;
    s["recompute"] = recompute;
    return s;
  };
  auto none = build_model(*backend, spec("none"), input, 1);
  auto blocks = build_model(*backend, spec("blocks"), input, 1);
  Tensor x = Tensor::empty({batch, seq}), y = Tensor::empty({batch, seq}, DType::i32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const auto token = static_cast<int64_t>(random_uniform(3, 0, i) * static_cast<float>(vocab));
    x.data<float>()[i] = static_cast<float>(token % vocab);
    y.data<int32_t>()[i] = static_cast<int32_t>((token + 1) % vocab);
  }
  const double tokens = static_cast<double>(batch * seq);
  const int64_t bytes_none = none->graph().activation_bytes();
  const int64_t bytes_blocks = blocks->graph().activation_bytes();
  std::printf(
      "gpt n_layer %lld n_head %lld n_embd %lld, block %lld, batch %lld, vocab %lld, "
      "dropout %g, %d thread%s\n",
      static_cast<long long>(layers), static_cast<long long>(heads), static_cast<long long>(embd),
      static_cast<long long>(seq), static_cast<long long>(batch), static_cast<long long>(vocab),
      dropout, threads, threads == 1 ? "" : "s");
  std::printf("activation bytes per token: none %.0f, blocks %.0f, ratio %.3f (estimates %s)\n",
              bytes_none / tokens, bytes_blocks / tokens,
              static_cast<double>(bytes_blocks) / static_cast<double>(bytes_none),
              estimate_activation_bytes(spec("none"), input, false) == bytes_none &&
                      estimate_activation_bytes(spec("none"), input, true) == bytes_blocks
                  ? "equal"
                  : "DIFFER");

  auto step = [&](Model& model) {
    const auto start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    model.forward(x, y);
    model.backward(1.0f / static_cast<float>(batch));
    backend->synchronize();
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    return threads == 1 ? process_cpu_seconds() - cpu_start : wall;
  };
  step(*none);  // warm-up: first-touch of the arenas, oneDNN's primitive caches
  step(*blocks);
  double best_none = 1e30, best_blocks = 1e30;
  for (int p = 0; p < pairs; ++p) {
    // Alternate which goes first, so that neither always follows the other.
    const bool none_first = p % 2 == 0;
    const double a = step(none_first ? *none : *blocks);
    const double b = step(none_first ? *blocks : *none);
    best_none = std::min(best_none, none_first ? a : b);
    best_blocks = std::min(best_blocks, none_first ? b : a);
    std::printf("pair %d: none %.3f s, blocks %.3f s\n", p + 1, none_first ? a : b,
                none_first ? b : a);
  }
  std::printf("step time (best of %d, %s): none %.3f s, blocks %.3f s, ratio %.3f\n", pairs,
              threads == 1 ? "process CPU time" : "wall time", best_none, best_blocks,
              best_blocks / best_none);
  return 0;
}
