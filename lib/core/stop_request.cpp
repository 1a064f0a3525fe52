#include "core/stop_request.h"

#include <unistd.h>  // _exit: all a handler may call

#include <atomic>
#include <csignal>

namespace dtrain {

namespace {

std::atomic<int> requested{0};

extern "C" void on_stop_signal(int signal) {
  int expected = 0;
  // Silent: the run says it is stopping once the ranks agree (a job being torn down by its
  // launcher gets SIGTERM too, and must not announce a stop that will not happen).
  if (requested.compare_exchange_strong(expected, signal)) return;
  if (signal == SIGINT) _exit(128 + SIGINT);  // the second Ctrl-C: now
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls in progress go on: the stop is cooperative
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
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
