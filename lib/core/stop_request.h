// A request to stop, from a signal (docs/architecture.md §3 exit codes 130 / 143): SIGINT or
// SIGTERM asks the run to finish the iteration in progress, write a checkpoint and the CSVs, and
// exit 128 + the signal; a second SIGINT ends the process at once.
#pragma once
#include <string>

namespace dtrain {

// Takes SIGINT and SIGTERM on a thread of their own (once, in main, before any other thread
// starts: the threads started later inherit the blocked signals).
void install_stop_handlers();
// The signal that asked this process to stop, or 0.
int stop_signal();
// Asks this process to stop as `signal` would (tests).
void request_stop(int signal);
// "SIGINT", "SIGTERM" (or "signal N"): for the messages.
std::string signal_name(int signal);
// Forgets a request (tests that go on after one).
void clear_stop_request();

}  // namespace dtrain
