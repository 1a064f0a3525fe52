#include "comm/comm_thread.h"

#include "core/cpu_policy.h"  // run_as_latency_bound_thread
#include "core/timer.h"       // Clock, seconds_since

namespace dtrain {

CommThread::CommThread(std::string trace_name)
    : track_(trace::new_track(std::move(trace_name))), thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

std::future<void> CommThread::submit(std::function<void()> task, Phase phase) {
  // The busy time is added before the future becomes ready, so a caller that waited for its
  // request sees that request's time in take_busy_seconds().
  std::packaged_task<void()> packaged([this, phase, task = std::move(task)] {
    struct Account {  // also when the task throws
      CommThread* self;
      Phase phase;
      Clock::time_point start = Clock::now();
      ~Account() {
        const Clock::time_point end = Clock::now();
        trace::record(trace_code(phase), start, end);
        std::lock_guard lock(self->mutex_);
        self->busy_s_ += std::chrono::duration<double>(end - start).count();
      }
    } account{this, phase};
    task();
  });
  std::future<void> done = packaged.get_future();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(packaged));
  }
  cv_.notify_one();
  return done;
}

double CommThread::take_busy_seconds() {
  std::lock_guard lock(mutex_);
  const double s = busy_s_;
  busy_s_ = 0;
  return s;
}

void CommThread::poll_when_idle(std::function<void()> poll, std::chrono::microseconds period) {
  {
    std::lock_guard lock(mutex_);
    idle_poll_ = std::move(poll);
    idle_period_ = period;
  }
  cv_.notify_one();
}

void CommThread::loop() {
  trace::ThreadScope traced(track_);
  // Started by a compute thread, it would inherit that thread's batch policy (core/cpu_policy.h).
  run_as_latency_bound_thread();
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mutex_);
      auto ready = [this] { return stopping_ || !queue_.empty(); };
      if (idle_poll_) {
        if (!cv_.wait_for(lock, idle_period_, ready)) {
          const std::function<void()> poll = idle_poll_;
          lock.unlock();
          poll();
          continue;
        }
      } else {
        cv_.wait(lock, ready);
      }
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // exceptions land in the task's future
  }
}

}  // namespace dtrain
