// CommThread: one per rank; runs communication requests on its own thread, one at a time in
// issue order, and hands back futures (DESIGN.md §2 decision 3). Its busy time is what
// timing.csv reports as comm_s; the time a compute thread spends in future::wait() is wait_s.
// Each request's span (its phase, start and end) goes to an observer when one is set (traces).
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>  // std::future, std::packaged_task
#include <memory>  // shared_ptr: the observer, called outside the lock
#include <mutex>
#include <thread>

#include "core/phase.h"  // Phase, Span: what a request's time is reported as

namespace dtrain {

class CommThread {
 public:
  CommThread();
  ~CommThread();  // runs what is queued, then joins
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `task`; its exception, if any, comes out of the future's get(). Its time counts as
  // `phase`.
  std::future<void> submit(std::function<void()> task, Phase phase = Phase::comm);
  // Receives every request's span, on the comm thread, after it ran (outside the thread's lock:
  // it may submit or take times, but must not throw).
  void set_span_observer(std::function<void(const Span&)> observer);
  // Seconds spent running tasks since the last call, whatever their phase (and resets it).
  double take_busy_seconds();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  double busy_s_ = 0;
  std::shared_ptr<const std::function<void(const Span&)>> observer_;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace dtrain
