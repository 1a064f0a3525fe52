// GEMM-only bound of an MLP training step: runs exactly the matrix products one step needs
// (per layer: forward y = x·Wᵀ, weight gradient dW = dyᵀ·x, and — except for the first
// layer — input gradient dx = dy·W) with dnnl_sgemm and nothing else, and prints the samples/s
// that would give. bench/engine_vs_pytorch.py compares dtrain's training throughput with it.
// With --sgd, each layer's weights also take the momentum-SGD step (momentum 0.9, weight decay:
// dtrain's own SGD, optim/sgd.h) right after their gradient's GEMM, as dtrain's one-rank
// training does: the bound of any engine whose optimizer step is a pass of its own.
//   dtrain_gemm_bound --batch 100 --layers 784,500,500,10 --threads 1 --seconds 3 [--sgd]
#include <omp.h>               // omp_set_num_threads
#include <oneapi/dnnl/dnnl.h>  // dnnl_sgemm

#include <CLI/CLI.hpp>  // command line
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"  // make_backend
#include "optim/sgd.h"        // make_sgd: dtrain's step

int main(int argc, char** argv) {
  CLI::App app{"GEMM-only bound of an MLP training step"};
  int64_t batch = 100;
  std::string layers_text = "784,500,500,10";
  int threads = 1;
  double seconds = 3.0;
  bool sgd = false;
  app.add_option("--batch", batch, "batch size");
  app.add_option("--layers", layers_text, "layer widths, input first");
  app.add_option("--threads", threads, "intra-op threads");
  app.add_option("--seconds", seconds, "measurement time");
  app.add_flag("--sgd", sgd, "also the momentum-SGD step of every layer's weights");
  CLI11_PARSE(app, argc, argv);
  omp_set_num_threads(threads);

  std::vector<int64_t> widths;
  std::stringstream ss(layers_text);
  for (std::string item; std::getline(ss, item, ',');) widths.push_back(std::stoll(item));
  const size_t n_layers = widths.size() - 1;
  std::vector<std::vector<float>> acts(widths.size()), grads(widths.size()), w(n_layers),
      dw(n_layers);
  for (size_t i = 0; i < widths.size(); ++i) {
    acts[i].assign(batch * widths[i], 0.01f);
    grads[i].assign(batch * widths[i], 0.01f);
  }
  for (size_t l = 0; l < n_layers; ++l) {
    w[l].assign(widths[l] * widths[l + 1], 0.01f);
    dw[l].assign(widths[l] * widths[l + 1], 0.0f);
  }
  // dtrain's own step on views of the same buffers; a tiny lr keeps w finite.
  auto backend = dtrain::make_backend({dtrain::DeviceChoice::cpu, threads, 0});
  auto view = [](std::vector<float>& b) {
    return dtrain::Tensor::borrow(b.data(), {static_cast<int64_t>(b.size())});
  };
  std::vector<std::unique_ptr<dtrain::Optimizer>> optimizers;
  for (size_t l = 0; l < n_layers; ++l)
    optimizers.push_back(dtrain::make_sgd(*backend, view(w[l]), view(dw[l]),
                                          dtrain::SgdOptions{0.9, 0.0, 1e-4, false}));
  auto sgd_step = [&](size_t l) { optimizers[l]->step(1e-6f); };
  int gemms_per_step = 0;
  auto step = [&] {
    gemms_per_step = 0;
    for (size_t l = 0; l < n_layers; ++l, ++gemms_per_step)
      dnnl_sgemm('N', 'T', batch, widths[l + 1], widths[l], 1.f, acts[l].data(), widths[l],
                 w[l].data(), widths[l], 0.f, acts[l + 1].data(), widths[l + 1]);
    for (size_t l = n_layers; l-- > 0;) {
      dnnl_sgemm('T', 'N', widths[l + 1], widths[l], batch, 1.f, grads[l + 1].data(), widths[l + 1],
                 acts[l].data(), widths[l], 0.f, dw[l].data(), widths[l]);
      ++gemms_per_step;
      if (sgd) sgd_step(l);
      if (l == 0) continue;  // nobody needs the gradient of the input images
      dnnl_sgemm('N', 'N', batch, widths[l], widths[l + 1], 1.f, grads[l + 1].data(), widths[l + 1],
                 w[l].data(), widths[l], 0.f, grads[l].data(), widths[l]);
      ++gemms_per_step;
    }
  };
  for (int i = 0; i < 20; ++i) step();  // warm-up: JIT kernels, caches
  using clock = std::chrono::steady_clock;
  int64_t steps = 0;
  auto start = clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 10; ++i) step();
    steps += 10;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  }
  std::printf(
      "gemm_bound batch=%lld layers=%s threads=%d gemms_per_step=%d sgd=%d step_ms=%.4f "
      "samples_per_s=%.1f\n",
      static_cast<long long>(batch), layers_text.c_str(), threads, gemms_per_step, sgd ? 1 : 0,
      1e3 * elapsed / steps, steps * batch / elapsed);
  return 0;
}
