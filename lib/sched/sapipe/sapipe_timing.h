// SAPipe's row of the timing model (docs/planning.md, SAPipe).
#pragma once
#include "plan/timing_model.h"              // TimingInputs, CodecCost, Prediction
#include "sched/sapipe/sapipe_algorithm.h"  // SapipeOptions

namespace dtrain {

// The plan's row (docs/planning.md, SAPipe): the k the run settles on — the options' or `auto`'s,
// checked and grown as the scheduler does — and the steady state of run_pipelined with it:
// the compute thread's passes (the compensation's), the hook's wait for the fresh sum, the
// fresh segments' all-reduces as backward makes them final, the comm thread's CPU share.
Prediction predict_sapipe(const TimingInputs& in, const CodecCost& codec,
                          const SapipeOptions& options);

}  // namespace dtrain
