// The Pipe-SGD timing model (paper §3.1–3.2, Eq. 2–7) for what dtrain actually runs: its inputs,
// its rows and the building blocks the rows are made of (an all-reduce, the compute time, the
// cost of idling). Each algorithm's own row lives beside its scheduler (lib/sched, *_timing.cpp;
// AlgorithmEntry::predict). Pure functions of measured inputs (the profiler supplies them), no
// I/O, so that the formulas can be checked against hand-computed numbers. Times are seconds;
// sizes are f32 elements unless a name says bytes.
#pragma once
#include <cstdint>  // int64_t
#include <string>
#include <vector>

#include "plan/link_cost.h"  // LinkCost, CommCost

namespace dtrain {

// Measured cost of one codec, per element of the block it works on, and its wire format
// (encoded_bytes(k) = header_bytes + bytes_per_element · k; for quantize8, 1 + 4/1024 bytes per
// element with its scales, exact for whole scale blocks).
struct CodecCost {
  std::string name;  // none | truncate16 | quantize8
  double encode_s = 0, decode_s = 0, decode_add_s = 0;
  double bytes_per_element = 4, header_bytes = 0;
  double wire_bytes(double elements) const { return header_bytes + bytes_per_element * elements; }
};

struct TimingInputs {
  // Computation on one rank, for its share of the global batch (paper: l_for, l_back, l_up),
  // plus the time the compute thread waits for the data loader.
  double l_for = 0, l_back = 0, l_up = 0, l_data = 0;
  // An algorithm that synchronises the ranks once per iteration waits for the slowest:
  // E[max over p ranks] − E[one rank] of the per-iteration compute time (part of the paper's S).
  // Gossip waits for no rank and leaves it out.
  double l_skew = 0;
  // Extra compute time of an iteration that starts after the compute thread idled idle_s[i]
  // waiting for communication (cold caches and clocks); linear in between, flat beyond the last.
  std::vector<double> idle_s, idle_penalty_s;
  // The run's optimizer, for the rows that copy its state or add its decay in passes of their
  // own (hpsgd): its state buffers of the parameters' size (SGD: 1 with momentum, else 0; AdamW:
  // its 2 moments), and whether its weight decay is SGD's, added to the gradient.
  int optimizer_states = 0;
  bool gradient_decay = false;
  int64_t n = 0;  // elements communicated per iteration: the trainable range of the gradient
  int p = 1;      // data-parallel ranks
  // cluster.stragglers: each rank's compute stretch (index = rank; a rank past the end: 1). A
  // slowed rank's l_for + l_back take that many times as long (emulated by a sleep after
  // backward); l_for and l_back above are an unslowed rank's. Each row says who waits for whom:
  // an algorithm that synchronises every rank runs at the slowest one's pace (compute_seconds).
  std::vector<double> rank_slowdown;
  int64_t global_batch = 1;
  // A rank's iterations per epoch (its loader's batches per epoch); 0: unknown. Gossip ends an
  // epoch once the ranks' updates together reach it, and pays the drain of the exchanges in
  // flight once per epoch.
  int64_t epoch_iterations = 0;
  // A message of b bytes costs α + b·(β + copy) (+ the overshoot of the emulated link's sleep):
  // plan/link_cost.h.
  LinkCost link;
  double gamma_s_per_byte = 0;  // γ: summing two f32 buffers, per byte of one of them
  double sync_s = 0;            // S: starting one collective on the comm thread and seeing it end
  // The comm thread has no core of its own (ranks × (threads_per_rank + 1) > cores): its CPU
  // work competes with the compute thread whenever the two overlap (Pipe-SGD).
  bool comm_shares_core = false;
  // The machine the ranks share: its cores (0: unknown, the rows take `crowding` as it is) and
  // the compute threads of each rank. `crowding`: compute threads per core (>= 1 when ranks ×
  // threads_per_rank > cores); l_for, l_back and l_up above include it, and the passes over
  // the parameters a row adds from β and γ (measured by one thread alone) are stretched by it
  // too. A row whose ranks do not all compute at once (gossip: the active ranks wait for their
  // exchanges) works out its own share from these.
  int cores = 0, threads_per_rank = 1;
  double crowding = 1;
  // How long a comm thread that waits for its peer by polling with sched_yield (MPI's waits)
  // takes to get its core back from a computing thread (measured; the rows use it where comm
  // threads share cores with compute threads).
  double yield_wait_s = 0;
  // SAPipe's profile: each trainable parameterised layer's forward and backward time, forward
  // order, and the elements of its gradient; empty when not profiled.
  std::vector<double> layer_forward_s, layer_backward_s;
  std::vector<int64_t> layer_elements;
  // SAPipe's passes over its stale prefix, each timed over the whole trainable range with the
  // run's optimizer right after a backward, as training runs them (profile_update_passes;
  // stretched as l_up is): wp3's step that also sums gᵀΔ (WeightPrediction::step_range_dot) and its
  // prediction with ĝ formed in the pass (predict_range_sum); wp1's and wp2's step fused with the
  // prediction (step_predict_range); the step that writes its change (step_range_delta: dc, wp3
  // with dc_form diag) and the prediction alone (predict_range: wp3 diag). Zero: not profiled,
  // the row counts such a pass as one l_up.
  double l_step_dot = 0, l_predict_sum = 0, l_step_predict = 0, l_step_delta = 0, l_predict = 0;
  std::vector<CodecCost> codecs;
};

struct Prediction {
  std::string algorithm, compression;
  int K = 0, L = 0;      // pipe_sgd only
  double compute_s = 0;  // l_up + l_for + l_back (+ l_data, l_skew) on the critical path
  double comm_s = 0;     // communication (with its codec work and S)
  double iteration_s = 0;
  bool compute_bound = false;  // compute_s >= comm_s
  double samples_per_s = 0;
  double speedup = 1;             // vs sync + none
  double scaling_efficiency = 1;  // Eq. 7: compute_s / iteration_s
  // Whether the speedups are measured against this row (D-Sync's: predict_sync marks them).
  bool reference = false;
  // How the ranks are used (plan.csv's last column): empty means data parallel on all of them;
  // PipeDream writes its stages ("3-1"), SAPipe its stale layers ("k=5").
  std::string configuration;
  // What the plan's table adds after the configuration (SAPipe: "stall 0.120 ms"); empty: none.
  std::string detail;
};

// One all-reduce of `elements` as GradientAllreducer runs it (MPI_Allreduce for `none`, dtrain's
// ring with the codec inside otherwise), split into waiting (latency, the emulated link's
// sleeps) and CPU work (codecs, copies, sums). Excludes S.
// When the ranks' compute threads outnumber the cores (crowding > 1), it also waits, on top of
// its transfers, for the last rank (oversubscribed_wait_s): the compute threads are time-sliced,
// so the ranks reach it up to a slice per thread on a core apart, and the last comm thread —
// polling in MPI, yielding its core — gets a core back only after a computing thread's slice.
CommCost allreduce_cost(const TimingInputs& in, const CodecCost& codec, double elements);
// The all-reduce's own transfers and CPU work, without that wait.
CommCost transfer_cost(const TimingInputs& in, const CodecCost& codec, double elements);
// The wait above: crowding × yield_wait_s where compute threads outnumber the cores
// (crowded_yield_wait_s; else 0), at most the crowded compute of an iteration (a rank is never
// later than all of it).
double crowded_yield_wait_s(const TimingInputs& in);
double oversubscribed_wait_s(const TimingInputs& in);
inline double allreduce_seconds(const TimingInputs& in, const CodecCost& codec, double elements) {
  return allreduce_cost(in, codec, elements).total();
}

// Building blocks of the algorithms' own rows (their registry entries):
// the compute stretch of rank `rank` (cluster.stragglers; 1: not slowed), and the slowest one's;
double rank_slowdown(const TimingInputs& in, int rank);
double slowest_slowdown(const TimingInputs& in);
// the paper's l_up + l_comp at the slowest rank's pace, plus what dtrain's compute thread also
// waits for each iteration — the loader, and the slowest rank's random lag (with one rank there
// is none to wait for): an iteration that synchronises every rank;
double compute_seconds(const TimingInputs& in);
// the comm thread's CPU work `cpu_s` per iteration where it has no core of its own
// (in.comm_shares_core; else the times unchanged): the core that computes also does that work
// (compute + cpu), and the part of it that meets the compute thread running — a fraction
// compute/comm of the time, when communication is longer — is time-sliced with it and takes
// twice as long (comm + cpu·min(1, compute/comm)). Where compute threads are crowded
// (in.crowding > 1, 4 ranks on 2 cores), that work shares the crowded cores as the compute does:
// it takes crowding × cpu_s of each (the MLP's Pipe-SGD on 4 ranks ran 30 % past a row that
// counted it once);
struct SharedCore {
  double compute_s = 0, comm_s = 0;
};
SharedCore share_core(const TimingInputs& in, double compute_s, double comm_s, double cpu_s);
// and a row from its parts (bound, samples/s and scaling efficiency derived).
Prediction make_prediction(const TimingInputs& in, const std::string& algorithm,
                           const CodecCost& codec, double compute_s, double comm_s,
                           double iteration_s);

// The iteration time speedups are measured against: the reference row (sync's) with codec none,
// else the first reference row.
double reference_seconds(const std::vector<Prediction>& rows);
// Sets each row's speedup against the reference row with codec none (or the first reference row
// when `none` is absent).
void set_speedups(std::vector<Prediction>& rows);

// The extra compute time after idling `idle` seconds (interpolated from the inputs' points).
double idle_penalty(const TimingInputs& in, double idle);

// Eq. 7: SE = (l_up + l_comp) / max(l_up + l_comp, l_comm) for a pipelined iteration.
double scaling_efficiency(double compute_s, double comm_s);

}  // namespace dtrain
