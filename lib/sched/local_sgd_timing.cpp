#include "sched/local_sgd_timing.h"

#include <algorithm>  // max
#include <cmath>      // sqrt

namespace dtrain {

// Local SGD as its scheduler runs it: every iteration computes and steps locally; every
// `period`-th also averages, the compute thread waiting for it: delta ← w − anchor (a copy and
// an axpy), the all-reduce of delta, w ← anchor + delta / p (a copy and an axpy), anchor ← w (a
// copy). The passes cost β (copies) and γ (axpys) per byte, stretched as the compute is when
// ranks share cores. The ranks meet once a period: the slowest rank's random lag over `period`
// iterations grows as √period (l_skew is that of one iteration).
Prediction predict_local_sgd(const TimingInputs& in, const CodecCost& codec, int period) {
  period = std::max(period, 1);
  const double compute = compute_seconds(in);
  if (in.p <= 1) return make_prediction(in, "local_sgd", codec, compute, 0, compute);
  const double n = static_cast<double>(in.n);
  const double bytes = 4.0 * n;
  const double passes =
      (3 * in.link.copy_s_per_byte + 2 * in.gamma_s_per_byte) * bytes * in.crowding;
  const double average = allreduce_seconds(in, codec, n) + in.sync_s + passes;
  const double comm = average / period;
  const double own = compute - in.l_skew + in.l_skew / std::sqrt(static_cast<double>(period));
  const double iteration = own + comm + idle_penalty(in, average) / period;
  return make_prediction(in, "local_sgd", codec, iteration - comm, comm, iteration);
}

}  // namespace dtrain
