// Wall-clock timing for the timing.csv breakdown and the benchmarks.
#pragma once
#include <chrono>  // steady_clock: monotonic, unaffected by clock changes

namespace dtrain {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Adds the lifetime of the scope to `*sink` (seconds): `{ ScopedTimer t(&stats.forward_s); ... }`.
class ScopedTimer {
 public:
  explicit ScopedTimer(double* sink) : sink_(sink), start_(Clock::now()) {}
  ~ScopedTimer() { *sink_ += seconds_since(start_); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  double* sink_;
  Clock::time_point start_;
};

}  // namespace dtrain
