#include "plan/partitioner.h"

#include <fmt/format.h>

#include <algorithm>  // max
#include <cmath>      // abs
#include <limits>

#include "core/error.h"

namespace dtrain {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Prefix sums over the chain, so that any stage's totals cost O(1).
struct Chain {
  explicit Chain(const PartitionProblem& p) : problem(p) {
    const size_t n = p.layers.size();
    compute.assign(n + 1, 0);
    params.assign(n + 1, 0);
    for (size_t l = 0; l < n; ++l) {
      compute[l + 1] = compute[l] + p.layers[l].compute_s();
      params[l + 1] = params[l] + p.layers[l].parameter_bytes;
    }
  }
  int layers() const { return static_cast<int>(problem.layers.size()); }

  struct StageTime {
    double compute = 0, sync = 0, total = 0;  // per minibatch, divided by the replicas
  };
  // Layers [i, j) as one stage on m replicas.
  StageTime stage(int i, int j, int m) const {
    const double t = compute[j] - compute[i];
    const double sync =
        4.0 * (m - 1) * (params[j] - params[i]) / (m * problem.bandwidth_bytes_per_s);
    StageTime s{t / m, sync / m, 0};
    s.total = problem.cost == PartitionCost::paper ? std::max(t, sync) / m : (t + sync) / m;
    return s;
  }
  // The cut before layer i: the paper's 2·C of the activation forward and its gradient back.
  double boundary(int i) const {
    if (problem.cost == PartitionCost::runtime) return 0;
    return 2 * problem.layers[static_cast<size_t>(i - 1)].activation_bytes /
           problem.bandwidth_bytes_per_s;
  }
  double cut_bytes(int i) const {
    return problem.layers[static_cast<size_t>(i - 1)].activation_bytes;
  }

  const PartitionProblem& problem;
  std::vector<double> compute, params;
};

// A DP cell: the best sub-pipeline found so far and how to rebuild it.
struct Cell {
  double time = kInf;
  int stages = 0;
  double cut_bytes = 0;                        // activations across its cuts: the last tie-break
  int prev_j = -1, prev_m = -1, replicas = 0;  // the cell before its last stage; that stage's
};

// Strictly better: a shorter time (beyond the relative tolerance), then fewer stages, then fewer
// activation bytes across the cuts. Equal candidates keep the first.
bool better(double rel, double time, int stages, double bytes, const Cell& than) {
  const double tol = rel * std::max(std::abs(time), std::abs(than.time));
  if (than.time == kInf) return time < kInf;
  if (time < than.time - tol) return true;
  if (time > than.time + tol) return false;
  if (stages != than.stages) return stages < than.stages;
  return bytes < than.cut_bytes;
}

void offer(double rel, Cell& cell, double time, int stages, double bytes, int prev_j, int prev_m,
           int r) {
  if (better(rel, time, stages, bytes, cell)) cell = {time, stages, bytes, prev_j, prev_m, r};
}

std::string layer_range(const std::vector<LayerProfile>& layers, int i, int j) {
  return i + 1 == j
             ? layers[static_cast<size_t>(i)].name
             : layers[static_cast<size_t>(i)].name + ".." + layers[static_cast<size_t>(j - 1)].name;
}

void check(const PartitionProblem& p) {
  DTRAIN_CHECK(!p.layers.empty()) << "partitioning an empty chain";
  DTRAIN_CHECK(p.machines >= 1) << "partitioning over " << p.machines << " machines";
  DTRAIN_CHECK(p.bandwidth_bytes_per_s > 0) << "bandwidth " << p.bandwidth_bytes_per_s;
}

}  // namespace

PartitionCost partition_cost_named(const std::string& name) {
  if (name == "paper") return PartitionCost::paper;
  DTRAIN_CHECK(name == "runtime") << "partition cost '" << name << "'";
  return PartitionCost::runtime;
}

const char* partition_cost_name(PartitionCost cost) {
  return cost == PartitionCost::paper ? "paper" : "runtime";
}

int Partition::machines() const {
  int m = 0;
  for (int r : replicas) m += r;
  return m;
}

std::string Partition::configuration() const {
  return fmt::format("{}", fmt::join(replicas, "-"));
}

std::vector<std::string> Partition::starts(const std::vector<LayerProfile>& layers) const {
  std::vector<std::string> names;
  for (size_t s = 1; s < first_layer.size(); ++s)
    names.push_back(layers[static_cast<size_t>(first_layer[s])].name);
  return names;
}

bool Partition::compute_bound() const {
  // The slowest part: a stage whose compute outweighs its weight sync, or else communication.
  for (size_t s = 0; s < stage_s.size(); ++s)
    if (stage_s[s] >= time_s) return stage_compute_s[s] >= stage_sync_s[s];
  return false;  // a cut's activations are the slowest
}

std::string Partition::describe(const std::vector<LayerProfile>& layers) const {
  std::string text;
  const int n = static_cast<int>(layers.size());
  for (int s = 0; s < stages(); ++s) {
    const size_t u = static_cast<size_t>(s);
    const int end = s + 1 < stages() ? first_layer[u + 1] : n;
    text += fmt::format(
        "    stage {} on {} rank(s): {:<28} {:9.3f} ms (compute {:.3f}, weight sync {:.3f}){}\n", s,
        replicas[u], layer_range(layers, first_layer[u], end), stage_s[u] * 1e3,
        stage_compute_s[u] * 1e3, stage_sync_s[u] * 1e3,
        stage_s[u] >= time_s ? "  <- slowest" : "");
    if (s + 1 < stages() && boundary_s[u] > 0)
      text += fmt::format("      cut before {}: activations and gradients {:.3f} ms{}\n",
                          layers[static_cast<size_t>(first_layer[u + 1])].name, boundary_s[u] * 1e3,
                          boundary_s[u] >= time_s ? "  <- slowest" : "");
  }
  return text;
}

Partition evaluate_partition(const PartitionProblem& problem, std::vector<int> first_layer,
                             std::vector<int> replicas) {
  check(problem);
  const Chain chain(problem);
  DTRAIN_CHECK(!first_layer.empty() && first_layer.front() == 0 &&
               first_layer.size() == replicas.size())
      << "a partition of " << first_layer.size() << " stage start(s), " << replicas.size()
      << " replica count(s)";
  Partition p;
  p.first_layer = std::move(first_layer);
  p.replicas = std::move(replicas);
  const int S = p.stages();
  for (int s = 0; s < S; ++s) {
    const size_t u = static_cast<size_t>(s);
    const int end = s + 1 < S ? p.first_layer[u + 1] : chain.layers();
    DTRAIN_CHECK(end > p.first_layer[u] && p.replicas[u] >= 1)
        << "stage " << s << ": layers [" << p.first_layer[u] << ", " << end << ") on "
        << p.replicas[u] << " replica(s)";
    const Chain::StageTime t = chain.stage(p.first_layer[u], end, p.replicas[u]);
    p.stage_s.push_back(t.total);
    p.stage_compute_s.push_back(t.compute);
    p.stage_sync_s.push_back(t.sync);
    p.time_s = std::max(p.time_s, t.total);
    if (s + 1 < S) {
      p.boundary_s.push_back(chain.boundary(end));
      p.time_s = std::max(p.time_s, p.boundary_s.back());
    }
  }
  p.noam = (p.machines() + p.replicas.front() - 1) / p.replicas.front();
  return p;
}

Partition best_partition(const PartitionProblem& problem) {
  check(problem);
  const Chain chain(problem);
  const int N = chain.layers(), M = problem.machines;
  // A[j][m]: layers [0, j) on m machines.
  std::vector<std::vector<Cell>> A(static_cast<size_t>(N + 1),
                                   std::vector<Cell>(static_cast<size_t>(M + 1)));
  for (int j = 1; j <= N; ++j)
    for (int m = 1; m <= M; ++m) {
      Cell& cell = A[static_cast<size_t>(j)][static_cast<size_t>(m)];
      offer(problem.tie_tolerance, cell, chain.stage(0, j, m).total, 1, 0, 0, 0,
            m);  // one stage, m replicas
      for (int i = 1; i < j; ++i) {
        const double boundary = chain.boundary(i);
        for (int r = 1; r < m; ++r) {  // the last stage [i, j) on r replicas
          const Cell& before = A[static_cast<size_t>(i)][static_cast<size_t>(m - r)];
          if (before.time == kInf) continue;
          const double time = std::max({before.time, boundary, chain.stage(i, j, r).total});
          offer(problem.tie_tolerance, cell, time, before.stages + 1,
                before.cut_bytes + chain.cut_bytes(i), i, m - r, r);
        }
      }
    }
  std::vector<int> first, replicas;
  for (int j = N, m = M; j > 0;) {
    const Cell& c = A[static_cast<size_t>(j)][static_cast<size_t>(m)];
    first.insert(first.begin(), c.prev_j > 0 ? c.prev_j : 0);
    replicas.insert(replicas.begin(), c.replicas);
    j = c.prev_j, m = c.prev_m;
  }
  return evaluate_partition(problem, first, replicas);
}

Partition best_replicas(const PartitionProblem& problem, const std::vector<int>& first_layer) {
  check(problem);
  const Chain chain(problem);
  const int S = static_cast<int>(first_layer.size()), M = problem.machines;
  DTRAIN_CHECK(S >= 1 && M >= S) << S << " stages on " << M << " machines";
  auto end_of = [&](int s) {
    return s + 1 < S ? first_layer[static_cast<size_t>(s + 1)] : chain.layers();
  };
  // D[s][m]: stages [0, s] on m machines.
  std::vector<std::vector<Cell>> D(static_cast<size_t>(S),
                                   std::vector<Cell>(static_cast<size_t>(M + 1)));
  for (int m = 1; m <= M; ++m)
    offer(problem.tie_tolerance, D[0][static_cast<size_t>(m)], chain.stage(0, end_of(0), m).total,
          1, 0, 0, 0, m);
  for (int s = 1; s < S; ++s) {
    const int begin = first_layer[static_cast<size_t>(s)];
    for (int m = s + 1; m <= M; ++m)
      for (int r = 1; r <= m - s; ++r) {
        const Cell& before = D[static_cast<size_t>(s - 1)][static_cast<size_t>(m - r)];
        if (before.time == kInf) continue;
        const double time =
            std::max({before.time, chain.boundary(begin), chain.stage(begin, end_of(s), r).total});
        offer(problem.tie_tolerance, D[static_cast<size_t>(s)][static_cast<size_t>(m)], time, s + 1,
              0, s - 1, m - r, r);
      }
  }
  std::vector<int> replicas(static_cast<size_t>(S));
  for (int s = S - 1, m = M; s >= 0; --s) {
    const Cell& c = D[static_cast<size_t>(s)][static_cast<size_t>(m)];
    replicas[static_cast<size_t>(s)] = c.replicas;
    m = c.prev_m;
  }
  return evaluate_partition(problem, first_layer, replicas);
}

Partition best_cuts(const PartitionProblem& problem, const std::vector<int>& replicas) {
  check(problem);
  const Chain chain(problem);
  const int S = static_cast<int>(replicas.size()), N = chain.layers();
  DTRAIN_CHECK(S >= 1 && N >= S) << S << " stages of " << N << " layers";
  // C[s][j]: layers [0, j) as stages [0, s].
  std::vector<std::vector<Cell>> C(static_cast<size_t>(S),
                                   std::vector<Cell>(static_cast<size_t>(N + 1)));
  for (int j = 1; j <= N; ++j)
    offer(problem.tie_tolerance, C[0][static_cast<size_t>(j)], chain.stage(0, j, replicas[0]).total,
          1, 0, 0, 0, replicas[0]);
  for (int s = 1; s < S; ++s) {
    const int r = replicas[static_cast<size_t>(s)];
    for (int j = s + 1; j <= N; ++j)
      for (int i = s; i < j; ++i) {
        const Cell& before = C[static_cast<size_t>(s - 1)][static_cast<size_t>(i)];
        if (before.time == kInf) continue;
        const double time = std::max({before.time, chain.boundary(i), chain.stage(i, j, r).total});
        offer(problem.tie_tolerance, C[static_cast<size_t>(s)][static_cast<size_t>(j)], time, s + 1,
              before.cut_bytes + chain.cut_bytes(i), i, s - 1, r);
      }
  }
  std::vector<int> first(static_cast<size_t>(S));
  for (int s = S - 1, j = N; s >= 0; --s) {
    const Cell& c = C[static_cast<size_t>(s)][static_cast<size_t>(j)];
    first[static_cast<size_t>(s)] = s == 0 ? 0 : c.prev_j;
    j = c.prev_j;
  }
  return evaluate_partition(problem, first, replicas);
}

}  // namespace dtrain
