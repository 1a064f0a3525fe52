// PipeDream's planner on a job (paper §3.1–3.2): the partitioner of lib/plan applied to
// what `algorithm:` leaves open. `stages: auto, replicas: auto` runs the full dynamic program;
// explicit stages with `replicas: auto` on more ranks than stages get the best replicas for those
// stages; `stages: auto` with explicit replicas gets the best cuts for them; both explicit are
// only evaluated — an explicit partition always wins over auto. The decision fills in the same
// two lists a user writes, so the runtime never sees `auto`.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "plan/link_cost.h"                      // LinkCost, LinkModel
#include "plan/partitioner.h"                    // LayerProfile, Partition
#include "plan/profiler.h"                       // TransportTimes
#include "sched/algorithm.h"                     // ChainPlan, ChainPlanInputs
#include "sched/pipeline/pipedream_scheduler.h"  // PipedreamOptions

namespace dtrain {

// The link between stages as dtrain's runtime pays it: the partitioner sees only the bandwidth
// a transfer sees; dtrain's prediction also the latency and what each transfer really costs.
struct PipelineLink {
  LinkCost cost;
  double poll_s = 0;  // a waiting rank sees an arrival this late on average
  // A replicated stage's all-reduce waits this long besides its messages, once a round: for
  // the slowest replica's lag (ChainPlanInputs::replica_lag_s), and for the last comm thread's
  // core on crowded cores, at most the stage's compute alone (ChainPlanInputs::crowded_wait_s:
  // min(crowded_wait_s, stage compute / crowding)).
  double reduce_wait_s = 0, crowded_wait_s = 0, crowding = 1;
  // One activation or gradient: a header and a payload message (each paced: latency + bytes / B,
  // late by the overshoot), the real copy, then the receiver's polling.
  double transfer_seconds(double bytes) const;
};

// The link of a job of this machine's ranks: cluster.link's (none: the transport is a memory
// copy) with the transport's measured timer overshoot, copy speed and hand-off
// (plan/link_cost.h).
PipelineLink pipeline_link(const std::optional<LinkModel>& emulated,
                           const TransportTimes& transport);
// The same with the transport measured here, on blocks of one rank's share of the chain's
// parameters over `ranks` (what a replicated stage's all-reduce moves at most).
PipelineLink measured_pipeline_link(const std::optional<LinkModel>& emulated,
                                    const std::vector<LayerProfile>& layers, int ranks);

struct PipelineChoice {
  std::vector<LayerProfile> layers;  // the profile it was chosen from
  PartitionProblem problem;          // ranks, bandwidth, cost
  PipelineLink link;
  Partition chosen;         // what trains
  Partition data_parallel;  // one stage on every rank
  Partition straight;       // the best pipeline of one rank per stage
  // dtrain's predicted time per minibatch of each (predict_pipeline_seconds).
  double chosen_s = 0, data_parallel_s = 0, straight_s = 0;
  std::string reason;     // which half was left to the planner
  double planning_s = 0;  // the partitioner and the predictions took this long
};

// dtrain's own prediction of partition `p`'s time per minibatch, beyond the partitioner's cost:
// the schedule of `options` simulated (pipeline_schedule.h) with the profile's stage times, each
// cut's activation and gradient crossing the link (latency + bytes / bandwidth, one message at
// a time per sender), and each replicated stage's ring all-reduce of its weights
// (2(R − 1) messages of 1/R of them). Activations and latency are what the `runtime` cost leaves
// out; the 1F1B round trip over a slow link is what neither cost sees.
// `tied_bytes` >= 0: the first and last stages share a weight of that size and sum its
// gradients before every step (a GPT's embedding and head), which pairs their steps.
double predict_pipeline_seconds(const std::vector<LayerProfile>& layers, const Partition& p,
                                const PipedreamOptions& options, const PipelineLink& link,
                                double tied_bytes = -1);

// Whether the options leave anything to decide for a job of `world` ranks (explicit stages with
// replicas: auto on as many ranks as stages leave nothing: one rank each).
bool pipeline_needs_planner(const PipedreamOptions& options, int world);

// Plans for `ranks` ranks over `link`. InputError naming the key when
// the explicit half does not fit the chain (a stage name that is not one of its cut points, more
// stages than ranks, replicas summing to other than the ranks).
// `tied_ends`: the chain's first and last elements share a tied weight (a GPT's embedding and
// head), so with schedule 1f1b a pipeline's first and last stages need as many replicas (they
// sum that weight's gradients every step); a choice left to the planner that has not falls back
// to the better of data parallelism and the straight pipeline.
// `tied_bytes`: the tied weight's size, for the predictions (0: not known, its exchange
// costs the link's latency).
PipelineChoice choose_pipeline(const std::vector<LayerProfile>& layers,
                               const PipedreamOptions& options, int ranks, const PipelineLink& link,
                               bool tied_ends = false, double tied_bytes = 0);

// `options` with the decision filled in (stages and replicas lists).
PipedreamOptions with_choice(PipedreamOptions options, const PipelineChoice& choice);

// What the planner chose and why: each candidate worth showing (pure data parallel, the best
// straight pipeline, the chosen one) with its predicted time per minibatch and bound, then the
// chosen one's stages (layers, replicas, time, parameters, stashed weight versions).
std::string describe_choice(const PipelineChoice& choice, const PipedreamOptions& options);

// PipeDream's row of the timing model (ModelParallelEntry::plan_chain): the planner for in.ranks
// over the link, with the options given, and the plan's row of its choice.
ChainPlan pipedream_chain_plan(const AlgorithmConfig& a, const ChainPlanInputs& in);

}  // namespace dtrain
