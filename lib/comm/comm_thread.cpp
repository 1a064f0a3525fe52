#include "comm/comm_thread.h"

#include "core/timer.h"  // Clock, seconds_since

namespace dtrain {

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void CommThread::set_span_observer(std::function<void(const Span&)> observer) {
  auto shared = std::make_shared<const std::function<void(const Span&)>>(std::move(observer));
  std::lock_guard lock(mutex_);
  observer_ = std::move(shared);
}

std::future<void> CommThread::submit(std::function<void()> task, Phase phase) {
  // The busy time is added before the future becomes ready, so a caller that waited for its
  // request sees that request's time in take_busy_seconds().
  std::packaged_task<void()> packaged([this, phase, task = std::move(task)] {
    struct Account {
      CommThread* self;
      Phase phase;
      Clock::time_point start = Clock::now();
      ~Account() {
        const Span span{phase, start, Clock::now()};
        std::shared_ptr<const std::function<void(const Span&)>> observer;
        {
          std::lock_guard lock(self->mutex_);
          self->busy_s_ += std::chrono::duration<double>(span.end - span.begin).count();
          observer = self->observer_;
        }
        if (observer && *observer) (*observer)(span);
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

void CommThread::loop() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // exceptions land in the task's future
  }
}

}  // namespace dtrain
