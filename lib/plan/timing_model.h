// The Pipe-SGD timing model (paper §3.1–3.2, Eq. 2–7) for what dtrain actually runs: its inputs,
// its rows and the building blocks the rows are made of (an all-reduce, the compute time, the
// cost of idling). Each algorithm's own row lives beside its registry row (sched/*_scheduler.cpp,
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
  int64_t n = 0;  // elements communicated per iteration: the trainable range of the gradient
  int p = 1;      // data-parallel ranks
  // cluster.stragglers: each rank's compute stretch (index = rank; a rank past the end: 1). A
  // slowed rank's l_for + l_back take that many times as long (emulated by a sleep after
  // backward); l_for and l_back above are an unslowed rank's. Each row says who waits for whom:
  // an algorithm that synchronises every rank runs at the slowest one's pace (compute_seconds).
  std::vector<double> rank_slowdown;
  int64_t global_batch = 1;
  // A message of b bytes costs α + b·(β + copy) (+ the overshoot of the emulated link's sleep):
  // plan/link_cost.h.
  LinkCost link;
  double gamma_s_per_byte = 0;  // γ: summing two f32 buffers, per byte of one of them
  double sync_s = 0;            // S: starting one collective on the comm thread and seeing it end
  // The comm thread has no core of its own (ranks × (threads_per_rank + 1) > cores): its CPU
  // work competes with the compute thread whenever the two overlap (Pipe-SGD).
  bool comm_shares_core = false;
  // The machine the ranks share: its cores (0: unknown, the rows take `crowding` as it is), the
  // compute threads of each rank, and the stretch the profile applied to l_for, l_back and l_up
  // for ranks × threads_per_rank compute threads on those cores (1: a core each). A row whose
  // ranks do not all compute at once (gossip: the active ranks wait for their exchanges) works
  // out its own share from these.
  int cores = 0, threads_per_rank = 1;
  double crowding = 1;
  // One hand-off between two comm threads waiting in MPI (which polls, yielding the core) while
  // compute threads hold every core but one: the poller behind a computing thread waits for the
  // end of its time slice.
  double yield_handoff_s = 0;
  // SAPipe's profile: each trainable parameterised layer's forward and backward time, forward
  // order, and the elements of its gradient; empty when not profiled.
  std::vector<double> layer_forward_s, layer_backward_s;
  std::vector<int64_t> layer_elements;
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
  // How the ranks are used (plan.csv's last column): empty means data parallel on all of them;
  // PipeDream writes its stages ("3-1"), SAPipe its stale layers ("k=5").
  std::string configuration;
  // What the plan's table adds after the configuration (SAPipe: "stall 0.120 ms"); empty: none.
  std::string detail;
};

// One all-reduce of `elements` as GradientAllreducer runs it (MPI_Allreduce for `none`, dtrain's
// ring with the codec inside otherwise), split into waiting (latency, the emulated link's
// sleeps) and CPU work (codecs, copies, sums). Excludes S.
CommCost allreduce_cost(const TimingInputs& in, const CodecCost& codec, double elements);
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
// and a row from its parts (bound, samples/s and scaling efficiency derived).
Prediction make_prediction(const TimingInputs& in, const std::string& algorithm,
                           const CodecCost& codec, double compute_s, double comm_s,
                           double iteration_s);

// The iteration time speedups are measured against: sync + none, else the first sync row.
double reference_seconds(const std::vector<Prediction>& rows);
// Sets each row's speedup against sync + none (or the first sync row when `none` is absent).
void set_speedups(std::vector<Prediction>& rows);

// The extra compute time after idling `idle` seconds (interpolated from the inputs' points).
double idle_penalty(const TimingInputs& in, double idle);

// Eq. 7: SE = (l_up + l_comp) / max(l_up + l_comp, l_comm) for a pipelined iteration.
double scaling_efficiency(double compute_s, double comm_s);

}  // namespace dtrain
