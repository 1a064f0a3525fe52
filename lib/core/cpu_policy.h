// How dtrain's threads use the CPU: two process-wide settings the dtrain program makes before it
// starts any thread (threads inherit both), and the comm threads' exception.
//
// - Denormal floats flush to zero (x86's FTZ and DAZ), as TensorFlow and XLA do by default. A
//   momentum or Adam moment decaying towards zero where a weight gets no gradient (a border
//   pixel's weights) passes through the denormal range, where every operation on it takes a
//   microcode assist: without the flush, Pipe-SGD's update on the Fashion-MNIST MLP took 6× as
//   long by the third epoch.
// - Compute threads run under SCHED_BATCH: the same share of the CPU, but their wake-ups do not
//   preempt a running thread. A compute thread wakes when the all-reduce it waits for ends, on
//   the core where the comm thread that finished it is about to start the next one; preempting
//   it there held that all-reduce back by a whole time slice (1.5 ms on 2 cores; the
//   measurements of both settings: bench/results/2026-11-27-sapipe-vs-pipe-sgd.md). Comm threads
//   (comm/comm_thread.h) switch back to the normal policy: their work is short and latency-bound.
#pragma once

namespace dtrain {

// Sets FTZ and DAZ for the calling thread (and the threads it starts afterwards). A no-op where
// the CPU has no such mode.
void flush_denormals();
// Whether the calling thread flushes denormals (for tests).
bool flushes_denormals();

// The calling thread (and the threads it starts afterwards) as a compute thread: SCHED_BATCH on
// Linux. Returns false where that is not possible (then nothing changed).
bool run_as_compute_thread();
// The calling thread as a latency-bound one: the normal policy (SCHED_OTHER), whatever it
// inherited.
void run_as_latency_bound_thread();
// Whether the calling thread runs as a compute thread (for tests).
bool runs_as_compute_thread();

}  // namespace dtrain
