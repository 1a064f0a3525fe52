#include "comm/paced_comm.h"

#include "core/timer.h"  // Clock

#include <algorithm>  // max
#include <chrono>
#include <cstdio>   // snprintf
#include <cstdlib>  // exit
#include <mutex>
#include <thread>  // sleep_for, sleep_until

#include "core/error.h"

namespace dtrain {
namespace {

void wait_seconds(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

class PacedComm final : public Comm {
 public:
  PacedComm(std::unique_ptr<Comm> inner, const LinkModel& link)
      : inner_(std::move(inner)), link_(link) {
    DTRAIN_CHECK(link_.bandwidth_Bps > 0) << "emulated link needs a positive bandwidth";
  }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_size() const override { return inner_->local_size(); }
  Comm& unpaced() override { return inner_->unpaced(); }
  std::optional<int> probe_any(int tag) override { return inner_->probe_any(tag); }
  void progress() override { inner_->progress(); }
  bool emulates_link() const override { return true; }
  std::string name() const override {
    char text[96];
    std::snprintf(text, sizeof text, ", emulated link %g Gbit/s + %g us",
                  link_.bandwidth_Bps * 8 / 1e9, link_.latency_s * 1e6);
    return inner_->name() + text;
  }

  void send(const void* d, size_t n, int peer, int tag) override {
    wait_seconds(link_.seconds_for(n));
    inner_->send(d, n, peer, tag);
  }
  // A blocking receive also waits for this rank's incoming link: messages from several senders
  // arrive one after another (a parameter server's bottleneck), not in parallel.
  void recv(void* d, size_t n, int peer, int tag) override {
    const auto start = Clock::now();
    inner_->recv(d, n, peer, tag);
    std::lock_guard lock(ingress_mutex_);
    ingress_free_ = std::max(ingress_free_, start) +
                    std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(n / link_.bandwidth_Bps));
    std::this_thread::sleep_until(ingress_free_);
  }
  std::unique_ptr<CommRequest> isend(const void* d, size_t n, int peer, int tag) override {
    wait_seconds(link_.seconds_for(n));
    return inner_->isend(d, n, peer, tag);
  }
  std::unique_ptr<CommRequest> irecv(void* d, size_t n, int peer, int tag) override {
    return inner_->irecv(d, n, peer, tag);
  }
  void sendrecv(const void* s, size_t sn, int dst, void* r, size_t rn, int src, int tag) override {
    wait_seconds(link_.seconds_for(sn));
    inner_->sendrecv(s, sn, dst, r, rn, src, tag);
  }

  void allreduce_sum(std::vector<double>& values) override { inner_->allreduce_sum(values); }
  std::unique_ptr<CommRequest> iallreduce_max(double* value) override {
    return inner_->iallreduce_max(value);
  }
  void allreduce_sum(const Tensor& buffer) override {
    const int p = size();
    if (p > 1)
      wait_seconds(2.0 * (p - 1) *
                   link_.seconds_for(static_cast<size_t>(buffer.bytes() / static_cast<double>(p))));
    inner_->allreduce_sum(buffer);
  }
  void broadcast(std::string& bytes, int root) override { inner_->broadcast(bytes, root); }
  void broadcast(const Tensor& buffer, int root) override {
    if (rank() == root && size() > 1) wait_seconds(link_.seconds_for(buffer.bytes()));
    inner_->broadcast(buffer, root);
  }
  std::vector<std::vector<double>> gather(const std::vector<double>& row, int root) override {
    return inner_->gather(row, root);
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Comm> split(int color, int key) override {
    return make_paced_comm(inner_->split(color, key), link_);
  }
  [[noreturn]] void abort(int exit_code) override {
    inner_->abort(exit_code);
    std::exit(exit_code);  // not reached: the inner abort does not return
  }

 private:
  std::unique_ptr<Comm> inner_;
  LinkModel link_;
  std::mutex ingress_mutex_;
  Clock::time_point ingress_free_{};  // when the incoming link is next idle
};

}  // namespace

std::unique_ptr<Comm> make_paced_comm(std::unique_ptr<Comm> inner, const LinkModel& link) {
  return std::make_unique<PacedComm>(std::move(inner), link);
}

}  // namespace dtrain
