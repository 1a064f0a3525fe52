// The training state a scheduler saves and restores (Scheduler::save and load, sched/scheduler.h),
// apart from the Scheduler itself so that the checkpoint code needs no scheduler.
#pragma once
#include <cstdint>
#include <string>
#include <utility>  // std::pair: named buffers and counters
#include <vector>

#include "backend/backend.h"  // Backend: copies from and to the device
#include "core/tensor.h"      // Tensor

namespace dtrain {

// What a scheduler needs to continue exactly where it was: named flat buffers (host copies,
// wherever the originals live) and named counters. run/checkpoint.h writes it to disk.
class SchedulerState {
 public:
  // Copies `flat` (f32, on `backend`'s device or the host) under `name`.
  void put(const std::string& name, const Tensor& flat, Backend& backend);
  // Copies the buffer `name` into `flat`; its size must match.
  void get(const std::string& name, const Tensor& flat, Backend& backend) const;
  void set_counter(const std::string& name, int64_t value);
  int64_t counter(const std::string& name) const;
  // Anything else, as text (a random generator's state).
  void set_text(const std::string& name, std::string value);
  const std::string& text(const std::string& name) const;
  bool has(const std::string& name) const;

  const std::vector<std::pair<std::string, std::vector<float>>>& buffers() const {
    return buffers_;
  }
  const std::vector<std::pair<std::string, int64_t>>& counters() const { return counters_; }
  const std::vector<std::pair<std::string, std::string>>& texts() const { return texts_; }
  // Adds a buffer read back from a checkpoint.
  void put_values(const std::string& name, std::vector<float> values);

 private:
  std::vector<std::pair<std::string, std::vector<float>>> buffers_;
  std::vector<std::pair<std::string, int64_t>> counters_;
  std::vector<std::pair<std::string, std::string>> texts_;
};

}  // namespace dtrain
