#include "comm/wait_watchdog.h"

#include <fmt/format.h>
#include <unistd.h>  // _exit: when even the abort hangs (the network is gone)

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;

// One thread's current wait. Slots are never freed: a process has a handful of threads.
struct Slot {
  std::mutex mu;
  bool waiting = false;
  Clock::time_point since;
  const char* op = "";
  int peer = -1;
  const char* context = nullptr;
  int step = -1;
};

struct Watchdog {
  std::mutex mu;  // slots, options, the thread
  std::vector<std::unique_ptr<Slot>> slots;
  WatchdogOptions options;
  std::condition_variable wake;
  bool running = false, stop = false;
  std::thread thread;

  Slot& new_slot() {
    std::lock_guard lock(mu);
    slots.push_back(std::make_unique<Slot>());
    return *slots.back();
  }

  void watch() {
    std::unique_lock lock(mu);
    auto last = Clock::now();
    while (!stop) {
      wake.wait_for(lock, std::chrono::milliseconds(200));
      if (stop) break;
      const auto now = Clock::now();
      // A gap far longer than the period: this process itself was stopped (SIGSTOP, a frozen
      // VM); its waits start again now rather than blame the peers for its own absence.
      const bool was_stopped = now - last > std::chrono::seconds(2);
      last = now;
      for (const auto& s : slots) {
        if (was_stopped) {
          std::lock_guard slot_lock(s->mu);
          s->since = now;
        }
      }
      for (const auto& s : slots) {
        std::lock_guard slot_lock(s->mu);
        const double waited = std::chrono::duration<double>(now - s->since).count();
        if (!s->waiting || waited < options.timeout_s) continue;
        std::string what = s->context ? s->context : s->op;
        if (s->context && s->step >= 0) what += fmt::format(" step {}", s->step);
        if (s->context) what += fmt::format(" ({})", s->op);
        const std::string message = describe_stalled_wait(options.rank, s->peer, what, waited);
        std::fprintf(stderr, "dtrain: %s\n", message.c_str());
        std::fflush(stderr);
        // The abort tells the launcher to end every rank; where the network to it is gone
        // too, this process ends on its own.
        std::thread([] {
          std::this_thread::sleep_for(std::chrono::seconds(3));
          _exit(1);
        }).detach();
        if (options.abort) options.abort();
        _exit(1);
      }
    }
  }
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog;  // never destroyed: guards may outlive static destruction
  return *w;
}

thread_local Slot* my_slot = nullptr;
thread_local const char* my_context = nullptr;
thread_local int my_step = -1;

Slot& slot() {
  if (!my_slot) my_slot = &watchdog().new_slot();
  return *my_slot;
}

}  // namespace

std::string describe_stalled_wait(int rank, int peer, const std::string& what, double seconds) {
  const std::string from =
      peer >= 0 ? fmt::format("no answer from rank {}", peer) : "no answer from the other ranks";
  return fmt::format(
      "rank {}: {} in {} for {:.0f} s (cluster.timeout_s): a rank stopped or the "
      "network failed; ending the job",
      rank, from, what, seconds);
}

void start_wait_watchdog(WatchdogOptions options) {
  Watchdog& w = watchdog();
  std::lock_guard lock(w.mu);
  w.options = std::move(options);
  if (w.running) return;
  w.running = true;
  w.stop = false;
  w.thread = std::thread([&w] { w.watch(); });
}

void stop_wait_watchdog() {
  Watchdog& w = watchdog();
  {
    std::lock_guard lock(w.mu);
    if (!w.running) return;
    w.stop = true;
    w.running = false;
  }
  w.wake.notify_all();
  w.thread.join();
}

WaitGuard::WaitGuard(const char* op, int peer) {
  Slot& s = slot();
  std::lock_guard lock(s.mu);
  s.waiting = true;
  s.since = Clock::now();
  s.op = op;
  s.peer = peer;
  s.context = my_context;
  s.step = my_step;
}

WaitGuard::~WaitGuard() {
  Slot& s = slot();
  std::lock_guard lock(s.mu);
  s.waiting = false;
}

WaitContext::WaitContext(const char* what, int step)
    : previous_what_(my_context), previous_step_(my_step) {
  my_context = what;
  my_step = step;
}

WaitContext::~WaitContext() {
  my_context = previous_what_;
  my_step = previous_step_;
}

void WaitContext::set_step(int step) {
  my_step = step;
}

}  // namespace dtrain
