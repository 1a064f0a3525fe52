// CommThread: one per rank; runs communication requests on its own thread, one at a time in
// issue order, and hands back futures (docs/architecture.md, decision 3). Its busy time is what
// timing.csv reports as comm_s; the time a compute thread spends in future::wait() is wait_s.
// Each request is a span of the comm thread's trace track (core/trace.h) when the thread that
// created it records a trace.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>  // std::future, std::packaged_task
#include <mutex>
#include <string>
#include <thread>

#include "core/phase.h"  // Phase: what a request's time is reported as
#include "core/trace.h"  // the creating thread's trace recorder

namespace dtrain {

class CommThread {
 public:
  // `trace_name`: the thread's name in trace.json (comm, gossip server, pipeline receive).
  explicit CommThread(std::string trace_name = "comm");
  ~CommThread();  // runs what is queued, then joins
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `task`; its exception, if any, comes out of the future's get(). Its time counts as
  // `phase`.
  std::future<void> submit(std::function<void()> task, Phase phase = Phase::comm);
  // Seconds spent running tasks since the last call, whatever their phase (and resets it).
  double take_busy_seconds();
  // While no task is queued, calls `poll` every `period` (not counted as busy). A pipeline's
  // sender polls MPI with it: without a progress thread, a receive posted ahead only advances
  // inside MPI calls, and a rank busy computing would hold its peers' sends back.
  void poll_when_idle(std::function<void()> poll, std::chrono::microseconds period);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::function<void()> idle_poll_;
  std::chrono::microseconds idle_period_{0};
  double busy_s_ = 0;
  trace::ThreadTrack* track_;  // made by the creating thread; null: no trace
  std::thread thread_;         // last: starts after the members it uses exist
};

}  // namespace dtrain
