// A Comm decorator for tests of algorithms that overlap communication with computation: every
// message and every buffer all-reduce first sleeps a random time (uniform in [0, max_ms], a
// stream of its own per rank), so that communication ends at random points of the computation
// and the ranks see it end at different points. Sub-communicators (an all-reducer's own) delay
// too, each with its own stream. It also counts what it sends (`traffic()`, shared with its
// sub-communicators): with max_ms = 0 it only counts.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdlib>  // abort
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "comm/comm.h"

namespace dtrain::test {

// Bytes and calls through a DelayingComm and its sub-communicators.
struct Traffic {
  std::atomic<int64_t> message_bytes{0}, messages{0};      // point-to-point sends
  std::atomic<int64_t> allreduce_bytes{0}, allreduces{0};  // buffer all-reduces
};

class DelayingComm final : public Comm {
 public:
  DelayingComm(std::unique_ptr<Comm> owned, Comm* inner, double max_ms, uint64_t seed,
               std::shared_ptr<Traffic> traffic = std::make_shared<Traffic>())
      : owned_(std::move(owned)),
        inner_(inner ? inner : owned_.get()),
        max_ms_(max_ms),
        random_(seed * 7919 + static_cast<uint64_t>(inner_->rank())),
        traffic_(std::move(traffic)) {}
  const Traffic& traffic() const { return *traffic_; }
  // Delays the messages of `inner` (which outlives it).
  DelayingComm(Comm& inner, double max_ms, uint64_t seed = 1)
      : DelayingComm(nullptr, &inner, max_ms, seed) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_size() const override { return inner_->local_size(); }
  bool emulates_link() const override { return inner_->emulates_link(); }
  std::string name() const override { return inner_->name() + " (random delays)"; }
  Comm& unpaced() override { return inner_->unpaced(); }
  std::optional<int> probe_any(int tag) override { return inner_->probe_any(tag); }

  void send(const void* d, size_t n, int peer, int tag) override {
    delay();
    count(n);
    inner_->send(d, n, peer, tag);
  }
  void recv(void* d, size_t n, int peer, int tag) override { inner_->recv(d, n, peer, tag); }
  std::unique_ptr<CommRequest> isend(const void* d, size_t n, int peer, int tag) override {
    delay();
    count(n);
    return inner_->isend(d, n, peer, tag);
  }
  std::unique_ptr<CommRequest> irecv(void* d, size_t n, int peer, int tag) override {
    return inner_->irecv(d, n, peer, tag);
  }
  void sendrecv(const void* s, size_t sn, int dst, void* r, size_t rn, int src, int tag) override {
    delay();
    count(sn);
    inner_->sendrecv(s, sn, dst, r, rn, src, tag);
  }
  void allreduce_sum(std::vector<double>& values) override {
    delay();
    inner_->allreduce_sum(values);
  }
  void allreduce_sum(const Tensor& buffer) override {
    delay();
    traffic_->allreduce_bytes += static_cast<int64_t>(buffer.bytes());
    ++traffic_->allreduces;
    inner_->allreduce_sum(buffer);
  }
  void broadcast(std::string& bytes, int root) override { inner_->broadcast(bytes, root); }
  void broadcast(const Tensor& buffer, int root) override { inner_->broadcast(buffer, root); }
  std::vector<std::vector<double>> gather(const std::vector<double>& row, int root) override {
    return inner_->gather(row, root);
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Comm> split(int color, int key) override {
    return std::make_unique<DelayingComm>(inner_->split(color, key), nullptr, max_ms_,
                                          ++splits_ * 104729, traffic_);
  }
  [[noreturn]] void abort(int exit_code) override {
    inner_->abort(exit_code);
    std::abort();  // not reached: the inner comm ends the process
  }

 private:
  void count(size_t bytes) {
    traffic_->message_bytes += static_cast<int64_t>(bytes);
    ++traffic_->messages;
  }
  void delay() {
    if (max_ms_ <= 0) return;
    double ms;
    {
      std::lock_guard lock(mutex_);
      ms = std::uniform_real_distribution<double>(0.0, max_ms_)(random_);
    }
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  }

  std::unique_ptr<Comm> owned_;
  Comm* inner_;
  double max_ms_;
  std::mutex mutex_;
  std::mt19937_64 random_;
  uint64_t splits_ = 0;
  std::shared_ptr<Traffic> traffic_;
};

}  // namespace dtrain::test
