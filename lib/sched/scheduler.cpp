#include "sched/scheduler.h"

#include <chrono>
#include <thread>  // sleep_for

namespace dtrain {

double Scheduler::emulate_straggler(double seconds) const {
  if (ctx_.compute_slowdown <= 1.0 || seconds <= 0) return 0;
  const double extra = (ctx_.compute_slowdown - 1.0) * seconds;
  std::this_thread::sleep_for(std::chrono::duration<double>(extra));
  return extra;
}

}  // namespace dtrain
