#include "sched/sync_timing.h"

#include "sched/pipe_sgd_timing.h"  // predict_pipe_sgd: D-Sync in segments is Eq. 6, K = 1

namespace dtrain {

Prediction predict_sync(const TimingInputs& in, const CodecCost& codec, int L) {
  Prediction r;
  if (L > 1) {
    r = predict_pipe_sgd(in, codec, 1, L);
    r.algorithm = "sync";
    r.K = 0;
  } else {
    // Eq. 2: l_up + l_comp + l_comm. The whole all-reduce is on the critical path: the
    // scheduler waits for it before the update, and computes again cold.
    const double comm =
        in.p > 1 ? allreduce_seconds(in, codec, static_cast<double>(in.n)) + in.sync_s : 0;
    const double compute = compute_seconds(in) + idle_penalty(in, comm);
    r = make_prediction(in, "sync", codec, compute, comm, compute + comm);
  }
  r.reference = true;  // the Pipe-SGD paper's baseline: the plan's speedups are against it
  return r;
}

}  // namespace dtrain
