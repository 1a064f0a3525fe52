// PipeDream's planner on a job (paper §3.1–3.2; issue 17): the partitioner of lib/plan applied to
// what `algorithm:` leaves open. `stages: auto, replicas: auto` runs the full dynamic program;
// explicit stages with `replicas: auto` on more ranks than stages get the best replicas for those
// stages; `stages: auto` with explicit replicas gets the best cuts for them; both explicit are
// only evaluated — an explicit partition always wins over auto. The decision fills in the same
// two lists a user writes, so the runtime never sees `auto`.
#pragma once
#include <string>
#include <vector>

#include "plan/partitioner.h"           // LayerProfile, Partition
#include "sched/pipedream_scheduler.h"  // PipedreamOptions

namespace dtrain {

struct PipelineChoice {
  std::vector<LayerProfile> layers;  // the profile it was chosen from
  PartitionProblem problem;          // ranks, bandwidth, cost
  double latency_s = 0;              // per message: dtrain's prediction counts it
  Partition chosen;                  // what trains
  Partition data_parallel;           // one stage on every rank
  Partition straight;                // the best pipeline of one rank per stage
  // dtrain's predicted time per minibatch of each (predict_pipeline_seconds).
  double chosen_s = 0, data_parallel_s = 0, straight_s = 0;
  std::string reason;  // which half was left to the planner
};

// dtrain's own prediction of partition `p`'s time per minibatch, beyond the partitioner's cost:
// the schedule of `options` simulated (pipeline_schedule.h) with the profile's stage times, each
// cut's activation and gradient crossing the link (latency + bytes / bandwidth, one message at
// a time per sender), and each replicated stage's ring all-reduce of its weights
// (2(R − 1) messages of 1/R of them). Activations and latency are what the `runtime` cost leaves
// out; the 1F1B round trip over a slow link is what neither cost sees.
double predict_pipeline_seconds(const std::vector<LayerProfile>& layers, const Partition& p,
                                const PipedreamOptions& options, double bandwidth_bytes_per_s,
                                double latency_s);

// Whether the options leave anything to decide for a job of `world` ranks (explicit stages with
// replicas: auto on as many ranks as stages leave nothing: one rank each).
bool pipeline_needs_planner(const PipedreamOptions& options, int world);

// Plans for `ranks` ranks over a link of `bandwidth_bytes_per_s`. InputError naming the key when
// the explicit half does not fit the chain (a stage name that is not one of its cut points, more
// stages than ranks, replicas summing to other than the ranks).
PipelineChoice choose_pipeline(const std::vector<LayerProfile>& layers,
                               const PipedreamOptions& options, int ranks,
                               double bandwidth_bytes_per_s, double latency_s);

// `options` with the decision filled in (stages and replicas lists).
PipedreamOptions with_choice(PipedreamOptions options, const PipelineChoice& choice);

// What the planner chose and why: each candidate worth showing (pure data parallel, the best
// straight pipeline, the chosen one) with its predicted time per minibatch and bound, then the
// chosen one's stages (layers, replicas, time, parameters, stashed weight versions).
std::string describe_choice(const PipelineChoice& choice, const PipedreamOptions& options);

}  // namespace dtrain
