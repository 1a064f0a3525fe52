// Pipeline schedules as data (docs/architecture.md, decision 5): a pure function turns the
// pipeline's shape (stages, replicas per stage) and the schedule's kind into one instruction list
// per rank; one interpreter runs every kind. Being data, a schedule can be validated (every
// minibatch's passes, every message matched, the in-flight bound), simulated for deadlocks and idle
// time, and printed as a rank × step grid without any hardware (DeepSpeed's
// runtime/pipe/schedule.py, PyTorch's distributed/pipelining/schedules.py).
//
// Kinds (PipeDream, Harlap et al. 2018, §3.3–3.5; GPipe; PipeDream-Flush):
//   1f1b        minibatches stream through without a flush: each replica of stage s admits up
//               to NOAM_s = ⌈(Σ_{s'≥s} R_s') / R_s⌉ minibatches (or `in_flight`), then alternates
//               one backward and one forward; replica b mod R_s of stage s runs both passes of
//               minibatch b (1F1B-RR) and steps after each backward (replicas first all-reduce
//               the round's gradients). The epoch's last minibatches drain.
//   gpipe       per optimizer step, the forwards of all microbatches, then their backwards, then
//               one all-reduce among replicas and one step.
//   1f1b_flush  per optimizer step, the microbatches in 1F1B order (at most the in-flight bound
//               admitted), then the flush: all-reduce and one step.
// Messages are derived from one function (peer_rank), so a sender and its receiver never
// disagree on who talks to whom (PipeDream #56 hung on mismatched replica routing).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::pipeline {

enum class Op : uint8_t {
  receive_activation,  // from the previous stage (the input stage loads the minibatch instead)
  forward,             // of `minibatch` (with weight stashing: on the version it stashes)
  send_activation,     // to the next stage
  receive_gradient,    // from the next stage (the output stage computes the loss instead)
  backward,            // of `minibatch` (with weight stashing: on the version its forward used)
  send_gradient,       // to the previous stage
  reduce_gradients,    // all-reduce among the stage's replicas, round `minibatch` (a collective)
  step,                // optimizer step: a new weight version
};

struct Instruction {
  Op op;
  int minibatch = -1;  // the minibatch (microbatch id for gpipe/1f1b_flush), or the round
  int peer = -1;       // the other rank of a send or receive
  bool operator==(const Instruction&) const = default;
};

// Ranks are laid out stage by stage: stage 0's replicas first.
struct PipelineShape {
  std::vector<int> replicas;  // per stage, each >= 1

  int stages() const { return static_cast<int>(replicas.size()); }
  int ranks() const;
  int first_rank(int stage) const;
  int stage_of(int rank) const;
  int replica_of(int rank) const;
  // The rank that runs minibatch `minibatch` on `stage` (1F1B-RR: replica minibatch mod R).
  int rank_of(int stage, int minibatch) const;
};

// The kinds above; the config's words (algorithm.schedule) are converted at the edge
// (schedule_kind_named), and what the code asks of a kind are ScheduleSpec's methods.
enum class ScheduleKind : uint8_t {
  one_f_one_b,        // 1f1b
  gpipe,              // gpipe
  one_f_one_b_flush,  // 1f1b_flush
};
// algorithm.schedule's word for `kind`, and back: InputError naming the key for another word.
std::string schedule_kind_name(ScheduleKind kind);
ScheduleKind schedule_kind_named(const std::string& word);

// Units are what passes through the pipeline one at a time: a minibatch of 1f1b, a microbatch
// of gpipe and 1f1b_flush. Iterations are what `minibatches` counts: minibatches of 1f1b,
// optimizer steps of gpipe and 1f1b_flush (pipedream's EpochPart units, epoch_iterations).
struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int minibatches = 1;   // 1f1b: of the epoch; gpipe, 1f1b_flush: optimizer steps
  int microbatches = 1;  // per optimizer step (gpipe, 1f1b_flush)
  // The input stage's replicas' bound, later stages' follow (in_flight_bound); 0: NOAM.
  int in_flight = 0;

  // Whether the pipeline drains for every optimizer step (gpipe, 1f1b_flush: a step's minibatch
  // split into microbatches, their gradients summed into one step); 1f1b streams minibatches and
  // each replica steps after each of its backwards.
  bool flushes() const { return kind != ScheduleKind::one_f_one_b; }
  // Whether a stage runs all forwards of a step before its backwards (gpipe), not 1F1B.
  bool forwards_first() const { return kind == ScheduleKind::gpipe; }
  // Whether a replica sums several backwards into one step: a flush of more than one microbatch.
  bool accumulates() const { return flushes() && microbatches > 1; }
  // Units per iteration: 1 (a 1f1b minibatch) or a step's microbatches.
  int units_per_iteration() const { return flushes() ? microbatches : 1; }
  // The schedule's units: its iterations' units.
  int units() const { return minibatches * units_per_iteration(); }
  // The iterations `units` units make (flushes: whole steps).
  int iterations_of(int units) const { return units / units_per_iteration(); }
  // Iterations one optimizer step of a stage of `replicas` replicas takes in, which its weight
  // versions count: 1f1b: a round of one minibatch per replica; flushes: the step.
  int iterations_per_step(int replicas) const { return flushes() ? 1 : replicas; }
  // The replicas of a stage of `replicas` replicas whose gradient joins reduction round `round`:
  // each has a unit of the round's, except in a last 1f1b round, or where a step has fewer
  // microbatches than the stage has replicas.
  int replicas_in_round(int round, int replicas) const;
};

// NOAM_s = ⌈(Σ_{s'≥s} R_s') / R_s⌉: minibatches a replica of stage s admits to keep the
// pipeline full in steady state (the paper's §3.3, with replicated stages).
int noam(const PipelineShape& shape, int stage);
// The in-flight bound of a replica of `stage` under `spec`.
int in_flight_bound(const PipelineShape& shape, const ScheduleSpec& spec, int stage);

// One instruction list per rank. Throws InputError for an impossible request (no stage, a
// replica count < 1, no minibatch).
std::vector<std::vector<Instruction>> build_schedule(const PipelineShape& shape,
                                                     const ScheduleSpec& spec);

// What validation found; empty `problems` means valid.
struct ScheduleCheck {
  std::vector<std::string> problems;
  std::vector<int> peak_in_flight;  // per rank: minibatches forwarded, not yet backwarded
};
// Checks, per rank and across ranks: each minibatch (or microbatch of each step) has exactly one
// forward and one backward per stage, on the replica rank_of() names, forward first; the
// in-flight count stays within the bound; every send has exactly one matching receive, in the
// same minibatch order per channel; every replica of a stage takes part in the same reduction
// rounds in the same order, each followed by a step.
ScheduleCheck validate_schedule(const PipelineShape& shape, const ScheduleSpec& spec,
                                const std::vector<std::vector<Instruction>>& schedule);

// A discrete-event run of the schedule: forward takes `forward_time`, backward `backward_time`,
// everything else no time; a send never blocks (as in the runtime, whose sends leave on a
// thread of their own), a receive waits for its message, a reduction until every replica of the
// stage reaches it. Returns each rank's (start time of each instruction); throws Error naming the
// stuck ranks' next instructions when no rank can move (a deadlock), or when a receive meets
// another minibatch first on its channel (the runtime's header mismatch).
std::vector<std::vector<double>> simulate_schedule(
    const PipelineShape& shape, const std::vector<std::vector<Instruction>>& schedule,
    double forward_time = 1, double backward_time = 1);

// The same with measured times: per stage its forward, backward (with its update) and its
// replicas' all-reduce; per cut between stages s and s + 1 the transfer of one message either
// way. A rank's messages leave one after the other (the runtime's sender thread) and arrive a
// transfer time later.
struct SimulationTimes {
  std::vector<double> forward_s, backward_s, reduce_s;  // per stage
  std::vector<double> transfer_s;                       // per cut: stages − 1
  // >= 0: the first and last stages share a tied weight and sum its gradients before each
  // step, replica q with replica q (as many replicas: check_tied_stages), which takes this long
  // once both are there; < 0: no tie.
  double tied_s = -1;
};
std::vector<std::vector<double>> simulate_schedule(
    const PipelineShape& shape, const std::vector<std::vector<Instruction>>& schedule,
    const SimulationTimes& times);

// dtrain's prediction of a pipeline's time per minibatch in steady state: the schedule of
// `spec` (its kind, microbatches, in_flight) simulated with `times` over enough minibatches that
// start-up and drain are left out — the mean gap between minibatches completing on the input
// stage over the second half.
double simulated_minibatch_seconds(const PipelineShape& shape, ScheduleSpec spec,
                                   const SimulationTimes& times);

// The rank × step grid: one row per rank ("r0 s0.0 | F0 F1 B0 F2 ..."), compute instructions
// only (sends and receives are implied), "R" a reduction, "S" a step.
std::string schedule_grid(const PipelineShape& shape,
                          const std::vector<std::vector<Instruction>>& schedule);

}  // namespace dtrain::pipeline
