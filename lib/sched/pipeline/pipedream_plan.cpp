#include "sched/pipeline/pipedream_plan.h"

#include <fmt/format.h>

#include <algorithm>  // min, find_if

#include "comm/stage_channel.h"  // kStagePollPeriod
#include "core/error.h"
#include "core/timer.h"               // Clock, seconds_since: the planning time
#include "sched/pipeline/schedule.h"  // in_flight_bound: the stashed versions

namespace dtrain {

namespace {

std::string names_of(const std::vector<LayerProfile>& layers) {
  std::string text;
  for (const LayerProfile& l : layers) text += (text.empty() ? "" : ", ") + l.name;
  return text;
}

// The chain indices of the stages' first layers, `stages:` checked against the chain.
std::vector<int> first_layers(const std::vector<LayerProfile>& layers,
                              const std::vector<std::string>& starts) {
  std::vector<int> first{0};
  for (size_t k = 0; k < starts.size(); ++k) {
    auto it = std::find_if(layers.begin(), layers.end(),
                           [&](const LayerProfile& l) { return l.name == starts[k]; });
    DTRAIN_INPUT_CHECK(it != layers.end())
        << "algorithm.stages[" << k << "]: '" << starts[k]
        << "' does not start an element of the model's partitionable chain (" << names_of(layers)
        << ")";
    const int i = static_cast<int>(it - layers.begin());
    DTRAIN_INPUT_CHECK(i > first.back())
        << "algorithm.stages[" << k << "]: stage " << k + 1 << " would be empty";
    first.push_back(i);
  }
  return first;
}

double mb(double bytes) {
  return bytes / 1e6;
}

std::string row(const char* what, const Partition& p, double predicted_s) {
  return fmt::format("  {:<32} {:<13} {:>10.3f} {:>13.3f}  {}\n", what, p.configuration(),
                     p.time_s * 1e3, predicted_s * 1e3,
                     p.compute_bound() ? "compute" : "communication");
}

}  // namespace

bool pipeline_needs_planner(const PipedreamOptions& o, int world) {
  if (o.stages.is("auto")) return true;
  return o.replicas.is("auto") && static_cast<int>(o.stages.value.size()) + 1 != world;
}

namespace {

// The schedule the options ask for (minibatches left to the caller).
pipeline::ScheduleSpec schedule_spec(const PipedreamOptions& o) {
  pipeline::ScheduleSpec spec;
  spec.kind = pipeline::schedule_kind_named(o.schedule);
  spec.microbatches = o.microbatches;
  spec.in_flight = o.in_flight.is("auto") ? 0 : o.in_flight.value;
  return spec;
}

}  // namespace

double PipelineLink::transfer_seconds(double bytes) const {
  constexpr double kHeaderBytes = 32;  // StageMessage
  const double latency = 2 * (cost.latency_s + cost.overshoot_s);
  const double sent =
      (bytes + kHeaderBytes) * (1 + cost.overshoot_per_s) / cost.transfer_bytes_per_s();
  // Without emulation the transfer is the copy, already paid at its bandwidth.
  return latency + sent + (cost.emulated() ? bytes * cost.copy_s_per_byte : 0) + poll_s;
}

PipelineLink pipeline_link(const std::optional<LinkModel>& emulated, const TransportTimes& t) {
  PipelineLink link;
  link.cost = link_cost(emulated, t);
  // Both ends test their transfers every kStagePollPeriod (each sleep late by the overshoot): a
  // large message's hand-shake waits for the sender's next test (a period: its first test,
  // right after starting, is too early), the receiver sees the arrival half a period late on
  // average, and the sender thread wakes for each message.
  const double poll = std::chrono::duration<double>(kStagePollPeriod).count() + t.overshoot_s;
  link.poll_s = 1.5 * poll + 0.5 * t.sync_s;
  return link;
}

PipelineLink measured_pipeline_link(const std::optional<LinkModel>& emulated,
                                    const std::vector<LayerProfile>& layers, int ranks) {
  double params = 0;
  for (const LayerProfile& l : layers) params += l.parameter_bytes;
  return pipeline_link(emulated, profile_transport(static_cast<int64_t>(params / 4 / ranks) + 1));
}

double predict_pipeline_seconds(const std::vector<LayerProfile>& layers, const Partition& p,
                                const PipedreamOptions& o, const PipelineLink& link,
                                double tied_bytes) {
  const pipeline::PipelineShape shape{p.replicas};
  const pipeline::ScheduleSpec spec = schedule_spec(o);
  // gpipe and 1f1b_flush pass microbatches: a share of the minibatch's time and bytes each.
  const double share = 1.0 / spec.microbatches;
  pipeline::SimulationTimes t;
  for (int s = 0; s < p.stages(); ++s) {
    const int begin = p.first_layer[static_cast<size_t>(s)];
    const int end = s + 1 < p.stages() ? p.first_layer[static_cast<size_t>(s + 1)]
                                       : static_cast<int>(layers.size());
    double forward = 0, backward = 0, params = 0;
    for (int l = begin; l < end; ++l) {
      const LayerProfile& layer = layers[static_cast<size_t>(l)];
      forward += layer.forward_s, backward += layer.backward_s, params += layer.parameter_bytes;
    }
    t.forward_s.push_back(forward * share);
    t.backward_s.push_back(backward * share);
    const double R = p.replicas[static_cast<size_t>(s)];
    // A ring all-reduce: 2(R − 1) paced messages of 1/R of the stage's weights.
    const LinkCost& cost = link.cost;
    const double message = cost.latency_s + cost.overshoot_s +
                           params / R * (1 + cost.overshoot_per_s) / cost.transfer_bytes_per_s();
    const double crowded =
        std::min(link.crowded_wait_s, (forward + backward) / std::max(1.0, link.crowding));
    t.reduce_s.push_back(R > 1 ? 2 * (R - 1) * message + link.reduce_wait_s + crowded : 0);
    if (s + 1 < p.stages())
      t.transfer_s.push_back(
          link.transfer_seconds(layers[static_cast<size_t>(end - 1)].activation_bytes * share));
  }
  // The ends' exchange of the tied weight's gradient (TiedWeights::sum_gradients): a message
  // each way, in parallel.
  if (tied_bytes >= 0 && p.stages() > 1) t.tied_s = link.transfer_seconds(tied_bytes);
  return pipeline::simulated_minibatch_seconds(shape, spec, t);
}

PipelineChoice choose_pipeline(const std::vector<LayerProfile>& layers, const PipedreamOptions& o,
                               int ranks, const PipelineLink& link, bool tied_ends,
                               double tied_bytes) {
  const auto start = Clock::now();
  PipelineChoice c;
  c.link = link;
  c.layers = layers;
  c.problem = {layers, ranks, link.cost.transfer_bytes_per_s(),
               partition_cost_named(o.partition_cost)};
  c.problem.tie_tolerance = 0.01;  // measured times: partitions within 1 % are a tie
  const int N = static_cast<int>(layers.size());
  if (!o.stages.is("auto")) {
    const std::vector<int> first = first_layers(layers, o.stages.value);
    const int S = static_cast<int>(first.size());
    if (o.replicas.is("auto")) {
      DTRAIN_INPUT_CHECK(S <= ranks) << "algorithm.stages: " << S << " stages need at least " << S
                                     << " ranks, the job has " << ranks;
      c.chosen = best_replicas(c.problem, first);
      c.reason = "replicas: auto for the given stages";
    } else {
      DTRAIN_INPUT_CHECK(static_cast<int>(o.replicas.value.size()) == S)
          << "algorithm.replicas: " << o.replicas.value.size() << " count(s) for the " << S
          << " stage(s) algorithm.stages makes";
      c.chosen = evaluate_partition(c.problem, first, o.replicas.value);
      c.reason = "stages and replicas given";
    }
  } else if (!o.replicas.is("auto")) {
    const std::vector<int>& replicas = o.replicas.value;
    DTRAIN_INPUT_CHECK(static_cast<int>(replicas.size()) <= N)
        << "algorithm.replicas: " << replicas.size() << " stages, but the model's chain has only "
        << N << " element(s) (" << names_of(layers) << ")";
    c.chosen = best_cuts(c.problem, replicas);
    c.reason = "stages: auto for the given replicas";
  } else {
    c.chosen = best_partition(c.problem);
    c.reason = "stages: auto, replicas: auto";
  }
  DTRAIN_INPUT_CHECK(c.chosen.machines() == ranks)
      << "algorithm.replicas: " << c.chosen.configuration() << " needs " << c.chosen.machines()
      << " rank(s), but the job has " << ranks;
  c.data_parallel = evaluate_partition(c.problem, {0}, {ranks});
  c.straight = best_cuts(c.problem, std::vector<int>(static_cast<size_t>(std::min(N, ranks)), 1));
  auto predict = [&](const Partition& p) {
    return predict_pipeline_seconds(layers, p, o, link, tied_ends ? tied_bytes : -1);
  };
  c.chosen_s = predict(c.chosen);
  c.data_parallel_s = predict(c.data_parallel);
  c.straight_s = predict(c.straight);
  // A tie between the ends under 1f1b: the replicas the planner chose must step together.
  const bool unequal_ends = c.chosen.replicas.front() != c.chosen.replicas.back();
  if (tied_ends && o.replicas.is("auto") && o.schedule == "1f1b" && unequal_ends) {
    const bool straight = c.straight.machines() == ranks && c.straight_s < c.data_parallel_s;
    c.chosen = straight ? c.straight : c.data_parallel;
    c.chosen_s = straight ? c.straight_s : c.data_parallel_s;
    c.reason += "; the tied first and last stages with as many replicas (1f1b)";
  }
  c.planning_s = seconds_since(start);
  return c;
}

PipedreamOptions with_choice(PipedreamOptions o, const PipelineChoice& c) {
  o.stages = config::WordOr<std::vector<std::string>>{"", c.chosen.starts(c.layers)};
  o.replicas = config::WordOr<std::vector<int>>{"", c.chosen.replicas};
  return o;
}

std::string describe_choice(const PipelineChoice& c, const PipedreamOptions& o) {
  const Partition& p = c.chosen;
  std::string text = fmt::format(
      "PipeDream's planner ({}) for {} rank(s), link {:.3g} Gbit/s + {:.3g} us; per minibatch: "
      "the partitioner's cost (partition_cost: {}) and dtrain's prediction (the schedule "
      "simulated with activations and latency)\n",
      c.reason, c.problem.machines, c.problem.bandwidth_bytes_per_s * 8e-9,
      c.link.cost.latency_s * 1e6, partition_cost_name(c.problem.cost));
  text += fmt::format("  {:<32} {:<13} {:>10} {:>13}  {}\n", "candidate", "configuration",
                      "cost_ms", "predicted_ms", "bound");
  text += row("data parallel", c.data_parallel, c.data_parallel_s);
  text += row(c.straight.machines() == c.problem.machines ? "straight pipeline"
                                                          : "straight pipeline (fewer ranks)",
              c.straight, c.straight_s);
  text += row("chosen", p, c.chosen_s);
  // The data-parallel candidate is not the table's sync row: see the line's text.
  text += fmt::format(
      "  (each replica of a stage runs whole minibatches, and its replicas' all-reduce averages "
      "one round of them: data parallel on {} ranks all-reduces once per {} minibatches, where "
      "the table's sync splits every minibatch over the ranks and all-reduces each)\n",
      c.problem.machines, c.problem.machines);
  const pipeline::PipelineShape shape{p.replicas};
  const pipeline::ScheduleSpec spec = schedule_spec(o);
  text += fmt::format(
      "chosen: stages {} (NOAM {}; {} pieces on {} ranks planned in {:.1f} ms), each "
      "stage:\n",
      p.stages() == 1 ? std::string("[]")
                      : fmt::format("[{}]", fmt::join(p.starts(c.layers), ", ")),
      p.noam, c.layers.size(), c.problem.machines, c.planning_s * 1e3);
  text += p.describe(c.layers);
  for (int s = 0; s < p.stages(); ++s) {
    const int end = s + 1 < p.stages() ? p.first_layer[static_cast<size_t>(s + 1)]
                                       : static_cast<int>(c.layers.size());
    double params = 0;
    for (int l = p.first_layer[static_cast<size_t>(s)]; l < end; ++l)
      params += c.layers[static_cast<size_t>(l)].parameter_bytes;
    const int versions = o.weight_stashing ? pipeline::in_flight_bound(shape, spec, s) : 1;
    text += fmt::format("    stage {}: {:.0f} parameters, {} weight version(s) kept = {:.1f} MB\n",
                        s, params / 4, versions, mb(params * versions));
  }
  return text;
}

namespace {

// `dtrain plan`'s row: dtrain's predicted time per minibatch of the chosen partition, the
// slowest stage's compute and communication.
Prediction pipedream_row(const PipelineChoice& c, int64_t batch) {
  Prediction r;
  r.algorithm = "pipedream";
  r.compression = "none";
  const Partition& p = c.chosen;
  for (int s = 0; s < p.stages(); ++s)
    if (p.stage_s[static_cast<size_t>(s)] >= r.compute_s + r.comm_s) {
      r.compute_s = p.stage_compute_s[static_cast<size_t>(s)];
      r.comm_s = p.stage_sync_s[static_cast<size_t>(s)];
    }
  for (double b : p.boundary_s) r.comm_s = std::max(r.comm_s, b);
  r.iteration_s = c.chosen_s;
  r.compute_bound = p.compute_bound();
  r.samples_per_s = r.iteration_s > 0 ? static_cast<double>(batch) / r.iteration_s : 0;
  r.scaling_efficiency = r.iteration_s > 0 ? std::min(1.0, r.compute_s / r.iteration_s) : 1;
  r.configuration = p.configuration();
  return r;
}

}  // namespace

// PipeDream's planner in `dtrain plan`, for in.ranks over the link, with the options given (an
// explicit partition that does not fit these ranks is planned as auto, and said); the link's
// transport as the plan measured it, else measured here for the chain.
ChainPlan pipedream_chain_plan(const AlgorithmConfig& a, const ChainPlanInputs& in) {
  const PipedreamOptions& given = a.get<PipedreamOptions>();
  PipelineLink link = in.transport ? pipeline_link(in.link, *in.transport)
                                   : measured_pipeline_link(in.link, in.chain, in.ranks);
  link.reduce_wait_s = in.replica_lag_s;
  link.crowded_wait_s = in.crowded_wait_s;
  link.crowding = in.crowding;
  std::string note;
  // The run plans its partition itself (the row's `plan`, pipedream_scheduler.cpp), from its own
  // profile of the chain (no straggler in it) and no wait beyond the messages. So the row's
  // partition is the one those costs pick, predicted with the rest added (where the two
  // differed, the plan predicted a partition the run did not train: the MLP at 10 Gbit/s on 4
  // ranks, 2-2 where the run trained 4, 32 % short).
  PipelineLink as_run = link;
  as_run.reduce_wait_s = as_run.crowded_wait_s = 0;
  const std::vector<LayerProfile>& run_chain = in.run_chain ? *in.run_chain : in.chain;
  auto choose = [&](const PipedreamOptions& o) {
    const PipelineChoice runs =
        choose_pipeline(run_chain, o, in.ranks, as_run, in.tied_ends, in.tied_bytes);
    PipelineChoice c = choose_pipeline(in.chain, with_choice(o, runs), in.ranks, link, in.tied_ends,
                                       in.tied_bytes);
    c.reason = runs.reason + ", as the run's own profile picks it";
    return c;
  };
  const PipelineChoice c = [&] {
    try {
      return choose(given);
    } catch (const InputError& e) {
      note = fmt::format(
          "(the configured partition does not fit {} rank(s): {}; planned with "
          "stages: auto, replicas: auto)\n",
          in.ranks, e.what());
      PipedreamOptions o = given;
      o.stages = PipedreamOptions{}.stages;
      o.replicas = PipedreamOptions{}.replicas;
      return choose(o);
    }
  }();
  return {pipedream_row(c, in.batch),
          note + "\n" + describe_choice(c, given) +
              "compare with a pipedream run: iteration_ms = 1000 * wall_s / iterations of "
              "timing.csv (a later epoch: the first creates the stages' compute primitives)\n"};
}

}  // namespace dtrain
