// Bounded waits (docs/architecture.md §3, cluster.timeout_s): every blocking wait on another rank
// is announced with a WaitGuard — the MPI calls, the pipeline's polled receives, the gossip
// server's — and one watchdog thread per process ends the job when one lasts longer than the
// timeout, naming this rank, what it waited in and for whom. The waits themselves stay the
// fast blocking calls they were; a guard costs an uncontended lock and a clock read.
#pragma once
#include <functional>
#include <string>

namespace dtrain {

struct WatchdogOptions {
  double timeout_s = 300;  // cluster.timeout_s
  int rank = 0;            // this process's rank in the job, for the message
  // Ends the job with exit code 1 (MPI_Abort); called once, from the watchdog's thread.
  std::function<void()> abort;
};

// Starts (or reconfigures) the process's watchdog.
void start_wait_watchdog(WatchdogOptions options);
// Stops it (the end of the run: nothing waits any more).
void stop_wait_watchdog();

// One blocking wait of this thread on `peer` (a rank of the job, -1: any or several) in the MPI
// operation `op`, from construction to destruction.
class WaitGuard {
 public:
  WaitGuard(const char* op, int peer);
  ~WaitGuard();
  WaitGuard(const WaitGuard&) = delete;
  WaitGuard& operator=(const WaitGuard&) = delete;
};

// Names what this thread's waits are part of while it exists ("ring all-reduce", step 3):
// the message says "in ring all-reduce step 3" instead of "in MPI_Sendrecv".
class WaitContext {
 public:
  explicit WaitContext(const char* what, int step = -1);
  ~WaitContext();
  void set_step(int step);
  WaitContext(const WaitContext&) = delete;
  WaitContext& operator=(const WaitContext&) = delete;

 private:
  const char* previous_what_;
  int previous_step_;
};

// The message of a wait that lasted `seconds` (exposed for the tests).
std::string describe_stalled_wait(int rank, int peer, const std::string& what, double seconds);

}  // namespace dtrain
