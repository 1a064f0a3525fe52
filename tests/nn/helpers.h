// Shared helpers of the nn tests: small graphs from YAML text, host random tensors, and a
// central-difference gradient check of a scalar loss.
#pragma once
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/rng.h"
#include "nn/graph.h"
#include "nn/layers/layers.h"
#include "nn/model.h"
#include "nn/spec.h"

namespace dtrain::test {

inline std::unique_ptr<Backend> cpu(int threads = 1) {
  return make_backend({DeviceChoice::cpu, threads});
}

// Graph nodes from a YAML `layers:` list (checked like a user's).
inline std::vector<GraphNode> nodes(const std::string& yaml) {
  std::vector<std::string> problems;
  YAML::Node list = check_layer_list(YAML::Load(yaml), problems);
  for (const auto& p : problems) INFO(p);
  REQUIRE(problems.empty());
  return make_nodes(list);
}

inline void fill_random(const Tensor& t, uint64_t stream, float lo = -1.0f, float hi = 1.0f) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = lo + (hi - lo) * random_uniform(99, stream, static_cast<uint64_t>(i));
}

inline Tensor random_tensor(const Shape& shape, uint64_t stream, float lo = -1.0f,
                            float hi = 1.0f) {
  Tensor t = Tensor::empty(shape);
  fill_random(t, stream, lo, hi);
  return t;
}

inline std::vector<float> to_vector(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// Up to `count` element indices spread over [0, n).
inline std::vector<int64_t> sample_indices(int64_t n, int64_t count = 48) {
  std::vector<int64_t> idx;
  if (n <= count) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t k = 0; k < count; ++k) idx.push_back((k * n) / count + (k * 7919) % (n / count));
  }
  return idx;
}

// Compares analytic gradients of `loss` with central differences at the sampled elements of
// `values` (perturbed in place and restored).
inline void compare_gradients(const std::string& what, const Tensor& values,
                              const std::vector<float>& analytic,
                              const std::function<double()>& loss, float step, double rtol = 2e-2) {
  double scale = 0;
  for (float a : analytic) scale = std::max(scale, static_cast<double>(std::fabs(a)));
  const double atol = 2e-3 + 1e-2 * scale;
  float* v = values.data<float>();
  int bad = 0;
  for (int64_t i : sample_indices(values.numel())) {
    const float saved = v[i];
    v[i] = saved + step;
    const double plus = loss();
    v[i] = saved - step;
    const double minus = loss();
    v[i] = saved;
    const double numeric = (plus - minus) / (2.0 * step);
    const double a = analytic[i];
    if (std::fabs(a - numeric) > atol + rtol * std::max(std::fabs(a), std::fabs(numeric))) {
      if (++bad <= 5) MESSAGE(what << "[" << i << "]: analytic " << a << " vs numeric " << numeric);
    }
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " gradient mismatches");
}

// Gradient check of a graph with loss L = Σ y·r for a fixed random r: with respect to the input
// and every parameter. Runs in training mode with a fixed dropout step.
struct GraphCheck {
  float step = 1e-2f;
  float input_lo = -1.0f, input_hi = 1.0f;
  bool randomise_params = false;  // e.g. batch-norm scale/shift away from 1 and 0
  // Input values on a shuffled grid: no ties (max pool) and none within step of zero (ReLU).
  bool distinct_input = false;
  // > 0: the input is token ids in [0, token_vocab) (as f32, as the loader gives them), which
  // have no gradient: only the parameters are checked.
  int64_t token_vocab = 0;
};

// Integer token ids in [0, vocab) as f32, the way the loader hands them over.
inline Tensor random_ids(const Shape& shape, int64_t vocab, uint64_t stream) {
  Tensor ids = Tensor::empty(shape);
  for (int64_t i = 0; i < ids.numel(); ++i)
    ids.data<float>()[i] = static_cast<float>(random_bits(17, stream, i) % vocab);
  return ids;
}

inline void fill_distinct(const Tensor& t, float lo, float hi) {
  const int64_t n = t.numel();
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates with the counter RNG
    std::swap(order[i], order[static_cast<int64_t>(random_bits(5, 0, i) % (i + 1))]);
  for (int64_t i = 0; i < n; ++i)
    t.data<float>()[i] = lo + (hi - lo) * (static_cast<float>(order[i]) + 0.5f) / n;
}

inline void check_graph_gradients(const std::string& yaml, const Shape& input_shape,
                                  GraphCheck opt = {}) {
  auto backend = cpu();
  Graph g(nodes(yaml), input_shape);
  const bool ids = opt.token_vocab > 0;
  g.materialize(*backend, 7, /*input_gradient=*/!ids);
  if (opt.randomise_params) fill_random(g.parameters(), 3, -0.6f, 0.6f);
  Tensor x = ids ? random_ids(input_shape, opt.token_vocab, 1)
                 : random_tensor(input_shape, 1, opt.input_lo, opt.input_hi);
  if (opt.distinct_input) fill_distinct(x, opt.input_lo, opt.input_hi);
  Tensor r = random_tensor(g.output_shape(), 2);
  const uint64_t step0 = g.step();
  auto loss = [&]() {
    g.set_step(step0);
    const Tensor& y = g.forward(x);
    double sum = 0;
    for (int64_t i = 0; i < y.numel(); ++i)
      sum += static_cast<double>(y.data<float>()[i]) * r.data<float>()[i];
    return sum;
  };
  loss();
  backend->copy(g.output_gradient(), r);
  g.backward();
  const std::vector<float> dparams = to_vector(g.gradients());
  if (!ids) compare_gradients("d/dinput", x, to_vector(g.input_gradient()), loss, opt.step);
  for (const LayerRange& range : g.layer_ranges()) {
    std::vector<float> part(dparams.begin() + range.offset,
                            dparams.begin() + range.offset + range.count);
    compare_gradients("d/d" + range.name, g.parameters().slice(range.offset, {range.count}), part,
                      loss, opt.step);
  }
}

}  // namespace dtrain::test
