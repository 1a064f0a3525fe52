// trace.json (docs/architecture.md §3): the run's trace recorder, its output.trace window, the
// alignment of every rank's clock with rank 0's, and the file, in Chrome/Perfetto Trace Event
// Format: one process per rank, one thread per dtrain thread, an "X" span per timed phase
// (core/phase.h) and per epoch and evaluation.
#pragma once
#include <cstdint>
#include <functional>  // measure_clock_offset's clock
#include <optional>
#include <string>

#include "comm/comm.h"         // Comm: clock alignment, the events' way to rank 0
#include "core/trace.h"        // Recorder, ThreadScope
#include "run/config_types.h"  // TraceConfig

namespace dtrain {

class RunTrace {
 public:
  // Makes the calling thread the rank's "compute" track; the threads it starts from now on
  // (loaders, comm threads) record into the same trace. Records nothing until epoch_starts().
  explicit RunTrace(const TraceConfig& config);
  // Preallocates the spans of the window for every thread, once the run's length is known.
  void reserve(int epochs, int64_t iterations_per_epoch, int64_t max_iterations);

  // Measures this rank's clock against rank 0's (a collective; call once, before training).
  void align_clocks(Comm& comm);
  // The window: called before each epoch (0-based) and after each iteration.
  void epoch_starts(int epoch);
  void iteration_done();
  // Stops recording; rank 0 writes `path` with every rank's spans (a collective).
  void write(Comm& comm, const std::string& path);

 private:
  bool in_iteration_window(int64_t iteration) const;  // 1-based, over the run

  TraceConfig config_;
  trace::Recorder recorder_;
  std::optional<trace::ThreadScope> compute_;
  int64_t iterations_ = 0;  // done so far
  int64_t offset_ns_ = 0;   // rank 0's clock − this rank's
  int64_t origin_ns_ = 0;   // time 0 of the file, on rank 0's clock
};

// What to add to this rank's `clock` (nanoseconds) to read rank 0's: a collective, by the round
// trip to rank 0 with the least delay (Cristian's algorithm; the error is at most half of it).
int64_t measure_clock_offset(Comm& comm, const std::function<int64_t()>& clock);

// One rank's spans as Trace Event Format objects, in pieces of a few MB handed to `emit` (a long
// run's trace never sits in memory twice).
void for_each_events_piece(const trace::Recorder& recorder, int rank, const std::string& host,
                           int64_t offset_ns, int64_t origin_ns,
                           const std::function<void(const std::string&)>& emit);
// All the pieces in one string: one rank's spans as Trace Event Format objects, one per line, each
// followed by a comma; times in microseconds since `origin_ns` after adding `offset_ns` (exposed
// for tests).
std::string trace_events_json(const trace::Recorder& recorder, int rank, const std::string& host,
                              int64_t offset_ns, int64_t origin_ns);

}  // namespace dtrain
