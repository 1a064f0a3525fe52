#include "core/stop_request.h"

#include <pthread.h>  // pthread_sigmask: no compute thread is ever interrupted
#include <unistd.h>   // _exit

#include <atomic>
#include <csignal>
#include <thread>

namespace dtrain {

namespace {

std::atomic<int> requested{0};

void on_stop_signal(int signal) {
  int expected = 0;
  // Silent: the run says it is stopping once the ranks agree (a job being torn down by its
  // launcher gets SIGTERM too, and must not announce a stop that will not happen).
  if (requested.compare_exchange_strong(expected, signal)) return;
  if (signal == SIGINT) _exit(128 + SIGINT);  // the second Ctrl-C: now
}

}  // namespace

// The signals are blocked in every thread (the mask is inherited by each thread started later:
// MPI's, the loaders', the comm threads', OpenMP's) and taken by one thread of their own with
// sigwait, so no signal frame is ever pushed onto a computing thread's stack. A handler run on the
// compute thread corrupted the heap about every second Ctrl-C of a CPU run ("corrupted size vs.
// prev_size", inside oneDNN): the kernel writes the frame below the interrupted stack pointer,
// where oneDNN's JIT kernels evidently keep data (with the frame on an alternate stack,
// sigaltstack, the crashes were gone as well).
void install_stop_handlers() {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  std::thread([stops] {
    for (;;) {
      int signal = 0;
      if (sigwait(&stops, &signal) == 0) on_stop_signal(signal);
    }
  }).detach();
}

int stop_signal() {
  return requested.load(std::memory_order_relaxed);
}

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal);
}

void clear_stop_request() {
  requested.store(0);
}

void request_stop(int signal) {
  int expected = 0;
  requested.compare_exchange_strong(expected, signal);
}

}  // namespace dtrain
