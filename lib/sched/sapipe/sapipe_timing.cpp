#include "sched/sapipe/sapipe_timing.h"

#include <fmt/format.h>

#include <algorithm>  // max, min
#include <string>
#include <vector>

#include "plan/stale_layers.h"  // choose_stale_layers, grow_stale_layers: `auto` as it runs

namespace dtrain {

namespace {

using sapipe_auto::kMaxAutoChecks;
using sapipe_auto::kSmallAllreduce;
using sapipe_auto::kTolerableWait;

// ── The plan's row: what run_pipelined does per iteration, simulated until steady ──

// The compute thread's passes over the parameters besides forward and backward, in steady state
// with `prefix` of the n trainable floats stale: before the forward, the prefix's step and the
// compensation's passes (apply_stale, step_and_predict_wp3, prediction_gradient); at the hook,
// the fresh layers' step (apply_fresh); after backward, the check that the whole gradient is
// finite (check_gradients: a dot over all n) and the own gradient kept (wp1, wp3).
// The optimizer's passes are the profile's, timed over all n floats (TimingInputs::l_step_dot
// ...), shared out by size; a pass of the backend's over the prefix costs what a copy (scale,
// scale_copy) or a sum (dot, axpby, DC's diagonal) of its bytes costs. Clipping's norms are not
// counted.
struct UpdateWork {
  double before_s = 0, hook_s = 0, after_s = 0;
};

UpdateWork update_work(const TimingInputs& in, const SapipeOptions& o, double prefix) {
  const double share = prefix / static_cast<double>(std::max<int64_t>(1, in.n));
  UpdateWork w;
  w.hook_s = in.l_up * (1 - share);
  w.after_s = 4 * static_cast<double>(in.n) * in.gamma_s_per_byte;  // check_gradients
  if (prefix <= 0) return w;
  auto pass = [&](double measured) { return (measured > 0 ? measured : in.l_up) * share; };
  const double copy = 4 * prefix * in.link.copy_s_per_byte, sum = 4 * prefix * in.gamma_s_per_byte;
  const std::string& c = o.compensation;
  const bool outer = o.dc_form == "outer";
  if (c == "none") {
    w.before_s = pass(in.l_up);
  } else if (c == "dc") {  // gᵀΔ and the scaling (outer) or the diagonal term, then the step
    w.before_s = pass(in.l_step_delta) + (outer ? sum + copy : sum);
  } else if (c == "wp1" || c == "wp2") {  // the step and the prediction in one pass
    w.before_s = pass(in.l_step_predict);
    if (c == "wp1") w.after_s += copy;  // wp2 predicts with the sum: no own gradient to keep
  } else if (outer) {  // wp3: the step summing gᵀΔ, the prediction forming ĝ (two passes)
    w.before_s = pass(in.l_step_dot) + pass(in.l_predict_sum);
    w.after_s += copy;
  } else {  // wp3, diag: the step with its change, ĝ in three passes, the prediction
    w.before_s = pass(in.l_step_delta) + 3 * sum + pass(in.l_predict);
    w.after_s += copy;
  }
  return w;
}

struct Schedule {
  double iteration_s = 0;  // steady state, per iteration
  double stall_s = 0;      // of it, the hook's wait for the fresh layers' sum
  double compute_s = 0;    // the compute thread's work (stretched where it shares a core)
  double comm_s = 0;       // the comm thread's
};

// run_pipelined with k stale layers, iteration after iteration: the compute thread loads the
// batch, waits for the prefix sum of t − 2 and steps it, runs the stale layers' forward, waits at
// the hook for the fresh sum of t − 1 and steps the fresh layers, finishes forward and runs
// backward, starting each of the fresh layers' `segments` (GradientSegments' cut) once backward
// has made it final, and starts the prefix's all-reduce at the end; the comm thread runs the
// all-reduces one at a time, in that order. `layers`: each one's forward and backward at the
// slowest rank's pace, `elements` its floats. Where the comm thread shares a core, the compute
// pieces and the all-reduces' CPU work stretch as share_core says.
Schedule simulate(const TimingInputs& in, const CodecCost& codec, const SapipeOptions& o,
                  const std::vector<LayerCost>& layers, const std::vector<int64_t>& elements,
                  int k) {
  const int m = static_cast<int>(layers.size());
  std::vector<int64_t> offset(static_cast<size_t>(m) + 1, 0);
  for (int i = 0; i < m; ++i) offset[i + 1] = offset[i] + elements[i];
  const int64_t total = offset[m], prefix = offset[k];
  // The fresh segments [bound_j, bound_j+1) and the layer whose backward makes each final.
  std::vector<int64_t> bound;
  std::vector<int> ready;
  if (prefix < total) {
    const int64_t fresh = total - prefix;
    const int64_t s = std::max<int64_t>(1, std::min<int64_t>(o.segments, fresh));
    for (int64_t j = 0; j <= s; ++j) bound.push_back(prefix + fresh * j / s);
    for (int64_t j = 0; j < s; ++j) {
      int layer = k;
      while (layer + 1 < m && offset[layer + 1] <= bound[j]) ++layer;
      ready.push_back(layer);
    }
  }
  auto cost = [&](double floats) {
    CommCost c = allreduce_cost(in, codec, floats);
    if (in.p > 1) c.wait_s += in.sync_s;
    return c;
  };
  std::vector<CommCost> parts;  // the fresh segments', then the prefix's
  for (size_t j = 0; j + 1 < bound.size(); ++j)
    parts.push_back(cost(static_cast<double>(bound[j + 1] - bound[j])));
  if (prefix > 0) parts.push_back(cost(static_cast<double>(prefix)));
  const UpdateWork u = update_work(in, o, static_cast<double>(prefix));
  double forward_stale = 0, forward_fresh = 0, backward = 0;
  for (int i = 0; i < m; ++i) {
    (i < k ? forward_stale : forward_fresh) += layers[i].forward_s;
    backward += layers[i].backward_s;
  }
  // Every rank goes at the slowest one's pace: its random lag (l_skew) is on the compute
  // thread's path each iteration, as in compute_seconds, and every all-reduce starts that much
  // after this rank asks for it (where the hook waits, the two cancel: D-Sync's compute + comm).
  const double lag = in.p > 1 ? in.l_skew : 0, lead = in.l_data + lag;
  const double compute =
      lead + u.before_s + forward_stale + u.hook_s + forward_fresh + backward + u.after_s;
  double comm = 0, cpu = 0;
  for (const CommCost& c : parts) comm += c.total(), cpu += c.cpu_s;
  const SharedCore shared = share_core(in, compute, comm, cpu);
  const double stretch = compute > 0 ? shared.compute_s / compute : 1;
  const double cpu_stretch = cpu > 0 ? 1 + (shared.comm_s - comm) / cpu : 1;
  auto duration = [&](const CommCost& c) {
    return in.p > 1 ? c.wait_s + c.cpu_s * cpu_stretch : 0;
  };

  constexpr int kIterations = 24, kSettled = 8;  // simulated, and of them the first not counted
  std::vector<double> fresh_done(kIterations, 0), stale_done(kIterations, 0);
  double t = 0, comm_free = 0, start = 0, stall = 0;
  for (int it = 0; it < kIterations; ++it) {
    if (it == kSettled) start = t;
    t += lead * stretch;
    if (prefix > 0 && it >= 2) t = std::max(t, stale_done[it - 2]);
    t += (u.before_s + forward_stale) * stretch;
    if (prefix < total && it >= 1 && fresh_done[it - 1] > t) {
      if (it >= kSettled) stall += fresh_done[it - 1] - t;
      t = fresh_done[it - 1];
    }
    t += (u.hook_s + forward_fresh) * stretch;
    int next = static_cast<int>(ready.size()) - 1;  // segments start last to first
    for (int i = m - 1; i >= 0; --i) {
      t += layers[i].backward_s * stretch;
      for (; next >= 0 && ready[next] >= i; --next)
        comm_free = std::max(t + lag, comm_free) + duration(parts[static_cast<size_t>(next)]);
    }
    fresh_done[it] = comm_free;
    t += u.after_s * stretch;
    if (prefix > 0)
      stale_done[it] = comm_free = std::max(t + lag, comm_free) + duration(parts.back());
  }
  Schedule s;
  s.iteration_s = (t - start) / (kIterations - kSettled);
  s.stall_s = stall / (kIterations - kSettled);
  s.compute_s = shared.compute_s;
  s.comm_s = shared.comm_s;
  // The compute thread waits, for the prefix sum or at the hook: it then starts cold.
  const double idle = s.iteration_s - s.compute_s;
  if (idle > 0) s.iteration_s = std::max(s.iteration_s, s.compute_s + idle_penalty(in, idle));
  return s;
}

}  // namespace

// The plan's row: the k the run settles on and its simulated steady state. `auto` chooses as the
// scheduler does — the paper's C2 over the profile's layers, the all-reduce (alone, as D-Sync
// times it) shared out by size — then checks its choice as the scheduler does: where the
// simulated hook waits more than kTolerableWait of the iteration, k grows (grow_stale_layers),
// at most kMaxAutoChecks times.
Prediction predict_sapipe(const TimingInputs& in, const CodecCost& codec,
                          const SapipeOptions& options) {
  const double comm = allreduce_seconds(in, codec, static_cast<double>(in.n)) + in.sync_s;
  // What any all-reduce costs however small: the fixed part that a second one adds.
  const double fixed = std::min(
      comm, allreduce_seconds(in, codec, std::min<double>(kSmallAllreduce, in.n)) + in.sync_s);
  const double slowest = slowest_slowdown(in);
  std::vector<LayerCost> layers;  // at the slowest rank's pace
  std::vector<int64_t> elements;
  const size_t m = in.layer_elements.size();
  if (m > 0 && in.layer_forward_s.size() == m && in.layer_backward_s.size() == m) {
    double forward = 0, backward = 0;
    for (size_t i = 0; i < m; ++i)
      forward += in.layer_forward_s[i], backward += in.layer_backward_s[i];
    // The per-layer times say where the time goes; the totals are the profile's.
    const double fs = forward > 0 ? in.l_for * slowest / forward : 0,
                 bs = backward > 0 ? in.l_back * slowest / backward : 0;
    for (size_t i = 0; i < m; ++i)
      layers.push_back({in.layer_forward_s[i] * fs, in.layer_backward_s[i] * bs,
                        (comm - fixed) * static_cast<double>(in.layer_elements[i]) /
                            static_cast<double>(std::max<int64_t>(1, in.n))});
    elements = in.layer_elements;
  } else {
    // No per-layer profile: one layer.
    layers.push_back({in.l_for * slowest, in.l_back * slowest, comm - fixed});
    elements.push_back(in.n);
  }
  const int count = static_cast<int>(layers.size());
  int k = 0;
  const auto& s = options.stale_layers;
  if (s.is("all")) {
    k = count;
  } else if (s.is("auto")) {
    std::vector<LayerCost> checked = layers;  // grow_stale_layers scales their v_i
    double per_allreduce = fixed;
    k = choose_stale_layers(checked, per_allreduce).k;
    for (int check = 0; check < kMaxAutoChecks && k < count; ++check) {
      const Schedule run = simulate(in, codec, options, layers, elements, k);
      if (run.stall_s <= kTolerableWait * run.iteration_s) break;
      k = grow_stale_layers(checked, per_allreduce, k, run.stall_s);
    }
  } else {
    k = std::min(s.value, count);
  }
  const Schedule run = simulate(in, codec, options, layers, elements, k);
  Prediction p = make_prediction(in, "sapipe", codec, run.compute_s, run.comm_s, run.iteration_s);
  p.configuration = "k=" + std::to_string(k);
  p.detail = fmt::format("stall {:.3f} ms", run.stall_s * 1e3);
  return p;
}

}  // namespace dtrain
